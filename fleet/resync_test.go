package fleet

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
)

// resyncTimeout is the round trip's bound of the pods of the degraded
// and stall tests: a call that waited on Redis would wait that long, far
// longer than a starved machine stalls a goroutine.
const resyncTimeout = time.Second

// TestDegradedAndResync: Redis killed, restarted empty, paused: calls
// never wait, the pods go local, and come back in sync with the state
// they had (an open that Redis forgot is written back).
func TestDegradedAndResync(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var fleets []*Fleet
	var pods []*circuit
	for range 2 {
		s := testSettings
		s.openTimeout = time.Minute // open through the drill
		f, c := newPodWith(t, Config{RedisURL: srv.URL(), Namespace: "degraded", FlushInterval: 50 * time.Millisecond,
			Timeout: resyncTimeout}, s)
		waitFor(t, syncWait, "sync", f.synced.Load)
		fleets, pods = append(fleets, f), append(pods, c)
	}
	if _, err := runOp(pods[0], tripOf(0)); err != nil {
		t.Fatal(err)
	}
	for _, c := range pods {
		waitFor(t, syncWait, "open", func() bool { return stateOf(c) == observe.BreakerOpen })
	}
	ok := func() (*http.Response, error) { return &http.Response{StatusCode: 200}, nil }

	srv.Kill()
	for _, f := range fleets {
		d := waitFor(t, syncWait, "degraded after kill", func() bool { return !f.Sync().Synced })
		t.Logf("degraded %v after kill: %s", d, f.Sync().LastError)
	}
	for i, c := range pods {
		start := time.Now()
		if _, err := c.Execute(ok); err != nil {
			t.Errorf("pod %d degraded: %v, want the local breaker's answer (closed)", i, err)
		}
		if d := time.Since(start); d >= resyncTimeout {
			t.Errorf("pod %d: a call took %v with Redis dead", i, d)
		}
	}

	srv.Restart()
	for _, f := range fleets {
		d := waitFor(t, syncWait, "in sync after restart", func() bool { return f.Sync().Synced })
		t.Logf("in sync %v after restart", d)
	}
	waitFor(t, syncWait, "the open written back", func() bool {
		got, _ := srv.Do("HGET", pods[0].base+":state", "s")
		return got == "1"
	})
	for _, c := range pods {
		if stateOf(c) != observe.BreakerOpen {
			t.Errorf("after restart: %v, want open", stateOf(c))
		}
	}
	for _, f := range fleets {
		t.Logf("before pause: %+v", f.Sync())
	}

	srv.Pause()
	start := time.Now()
	if _, err := pods[0].Execute(ok); !(errors.Is(err, errOpen) || errors.Is(err, gobreaker.ErrOpenState)) || time.Since(start) >= resyncTimeout {
		t.Errorf("paused Redis: %v after %v, want open at once", err, time.Since(start))
	}
	for _, f := range fleets {
		waitFor(t, syncWait, "degraded while paused", func() bool { return !f.Sync().Synced })
	}
	srv.Resume()
	for _, f := range fleets {
		d := waitFor(t, syncWait, "in sync after resume", func() bool { return f.Sync().Synced })
		t.Logf("in sync %v after resume", d)
	}
}

// TestBriefStallKeepsTheFleetState: a round trip that times out (a Redis
// or a machine stalled for less than 3 x Timeout) does not make the pod
// local: its breaker stays the fleet's (open), so it sends nothing to the
// upstream, and it stays in sync. A stall that lasts is a failure
// (TestDegradedAndResync).
func TestBriefStallKeepsTheFleetState(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := testSettings
	s.openTimeout = time.Minute
	const timeout = resyncTimeout
	f, c := newPodWith(t, Config{RedisURL: srv.URL(), Namespace: "stall", FlushInterval: 50 * time.Millisecond,
		Timeout: timeout}, s)
	waitFor(t, syncWait, "sync", f.synced.Load)
	if _, err := runOp(c, tripOf(0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, syncWait, "open", func() bool { return stateOf(c) == observe.BreakerOpen })
	sent := 0
	call := func() {
		c.Execute(func() (*http.Response, error) { sent++; return &http.Response{StatusCode: 200}, nil })
	}
	srv.Pause()
	start := time.Now()
	f.readSoon.Store(true)
	f.wake() // a round trip now, into the stall
	for f.Sync().LastError == "" && time.Since(start) < syncWait {
		call()
		time.Sleep(time.Millisecond)
	}
	srv.Resume() // one round trip failed: the stall ends
	stalled := time.Since(start)
	for end := time.Now().Add(3 * timeout); time.Now().Before(end); time.Sleep(time.Millisecond) {
		call()
	}
	st := f.Sync()
	t.Logf("Redis stalled %v (a round trip timed out: %q): %+v", stalled.Round(time.Millisecond), st.LastError, st)
	if st.LastError == "" {
		t.Fatalf("no round trip failed in %v of stall", stalled)
	}
	if !st.Synced || sent > 0 {
		t.Errorf("after the stall: synced %v, %d calls sent to the upstream; want in sync, none sent", st.Synced, sent)
	}
}
