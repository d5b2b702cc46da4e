package fleet

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// TestDegradedAndResync: Redis killed, restarted empty, paused: calls
// never wait, the pods go local, and come back in sync with the state
// they had (an open that Redis forgot is written back).
func TestDegradedAndResync(t *testing.T) {
	srv := redistest.Start(t)
	var fleets []*Fleet
	var pods []*circuit
	for range 2 {
		s := testSettings
		s.openTimeout = time.Minute // open through the drill
		f, c := newPod(t, srv, "degraded", s)
		waitFor(t, syncWait, "sync", f.synced.Load)
		fleets, pods = append(fleets, f), append(pods, c)
	}
	if _, err := runOp(pods[0], tripOf(0)); err != nil {
		t.Fatal(err)
	}
	for _, c := range pods {
		waitFor(t, time.Second, "open", func() bool { return c.State() == gobreaker.StateOpen })
	}
	ok := func() (*http.Response, error) { return &http.Response{StatusCode: 200}, nil }

	srv.Kill()
	for _, f := range fleets {
		d := waitFor(t, 2*time.Second, "degraded after kill", func() bool { return !f.Sync().Synced })
		t.Logf("degraded %v after kill: %s", d, f.Sync().LastError)
	}
	for i, c := range pods {
		start := time.Now()
		if _, err := c.Execute(ok); err != nil {
			t.Errorf("pod %d degraded: %v, want the local breaker's answer (closed)", i, err)
		}
		// Generous: a call that waited on Redis would wait its 100ms
		// timeout; this machine may stall a goroutine for a few ms.
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Errorf("pod %d: a call took %v with Redis dead", i, d)
		}
	}

	srv.Restart()
	for _, f := range fleets {
		d := waitFor(t, syncWait, "in sync after restart", func() bool { return f.Sync().Synced })
		t.Logf("in sync %v after restart", d)
	}
	waitFor(t, time.Second, "the open written back", func() bool {
		got, _ := srv.Do("HGET", pods[0].base+":state", "s")
		return got == "1"
	})
	for _, c := range pods {
		if c.State() != gobreaker.StateOpen {
			t.Errorf("after restart: %v, want open", c.State())
		}
	}
	for _, f := range fleets {
		t.Logf("before pause: %+v", f.Sync())
	}

	srv.Pause()
	start := time.Now()
	if _, err := pods[0].Execute(ok); !errors.Is(err, gobreaker.ErrOpenState) || time.Since(start) > 50*time.Millisecond {
		t.Errorf("paused Redis: %v after %v, want open at once", err, time.Since(start))
	}
	for _, f := range fleets {
		waitFor(t, 3*time.Second, "degraded while paused", func() bool { return !f.Sync().Synced })
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
	srv := redistest.Start(t)
	s := testSettings
	s.openTimeout = time.Minute
	const timeout = 200 * time.Millisecond
	f, err := New(context.Background(), Config{RedisURL: srv.URL(), Namespace: "stall", FlushInterval: 50 * time.Millisecond,
		Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := f.add(s, testLocal(s), testJudge)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, syncWait, "sync", f.synced.Load)
	if _, err := runOp(c, tripOf(0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "open", func() bool { return c.State() == gobreaker.StateOpen })
	sent := 0
	call := func() {
		c.Execute(func() (*http.Response, error) { sent++; return &http.Response{StatusCode: 200}, nil })
	}
	srv.Pause()
	start := time.Now()
	f.readSoon.Store(true)
	f.wake() // a round trip now, into the stall
	for f.Sync().LastError == "" && time.Since(start) < 5*time.Second {
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
