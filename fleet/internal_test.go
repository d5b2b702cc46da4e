package fleet

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
)

var errUpstream = errors.New("upstream failed")

func testJudge(err error) observe.Verdict {
	switch {
	case err == nil:
		return observe.VerdictSuccess
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests), err == errExcludedForTest:
		return observe.VerdictExcluded
	}
	return observe.VerdictFailure
}

var testSettings = settings{minRequests: 20, ratio: 0.5, window: 30 * time.Second, openTimeout: 2 * time.Second, probes: 2, callTimeout: time.Second}

func testLocal(s settings) *gobreaker.CircuitBreaker[*http.Response] {
	return gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		MaxRequests: uint32(s.probes), Interval: s.window, BucketPeriod: s.window / 10, Timeout: s.openTimeout,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			j := n.TotalSuccesses + n.TotalFailures
			return j >= uint32(s.minRequests) && float64(n.TotalFailures) >= s.ratio*float64(j)
		},
	})
}

// pod is one fleet with one system, "payments".
func newPod(t *testing.T, srv *redistest.Server, ns string, s settings) (*Fleet, *circuit) {
	t.Helper()
	f, err := New(context.Background(), Config{RedisURL: srv.URL(), Namespace: ns, FlushInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := f.add("payments", s, testLocal(s), testJudge)
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func fail() (*http.Response, error) { return nil, errUpstream }

func TestEvidenceSpreadThin(t *testing.T) {
	srv := redistest.Start(t)
	var pods []*circuit
	for range 10 {
		f, c := newPod(t, srv, "thin", testSettings)
		waitFor(t, 2*time.Second, "sync", f.synced.Load)
		pods = append(pods, c)
	}
	for _, c := range pods {
		for range 3 {
			c.Execute(fail)
		}
		if got := c.local.State(); got != gobreaker.StateClosed {
			t.Fatalf("local breaker %v after 3 failures, want closed", got)
		}
	}
	for i, c := range pods {
		waitFor(t, 2*time.Second, "fleet open", func() bool { return c.State() == gobreaker.StateOpen })
		if _, err := c.Execute(fail); !errors.Is(err, gobreaker.ErrOpenState) {
			t.Fatalf("pod %d: err %v, want open", i, err)
		}
	}
}

// TestIssue13StaleWriter (issue #13, test 4): a writer that missed the
// change to a newer open (it still believes the old version closed, or
// half-open) cannot close it, nor write back an older state.
func TestIssue13StaleWriter(t *testing.T) {
	srv := redistest.Start(t)
	f, c := newPod(t, srv, "stale", testSettings)
	waitFor(t, 2*time.Second, "sync", f.synced.Load)
	ctx := context.Background()
	key := []string{c.base + ":state"}
	r, err := tripScript.Run(ctx, f.rdb, key, 0, 60000, f.channel, "payments").Int64Slice()
	if err != nil || r[0] != 1 || r[1] != 1 {
		t.Fatalf("trip v0: %v %v, want v1 open", r, err)
	}
	// A writer that still believes v0 (closed) or a stale half-open v0.
	for _, try := range []struct {
		name string
		run  func() ([]int64, error)
	}{
		{"trip v0 again", func() ([]int64, error) {
			return tripScript.Run(ctx, f.rdb, key, 0, 1, f.channel, "payments").Int64Slice()
		}},
		{"probe success v0", func() ([]int64, error) {
			return probeScript.Run(ctx, f.rdb, key, 0, 1, 1, 1, f.channel, "payments").Int64Slice()
		}},
		{"probe success v1 while still open", func() ([]int64, error) {
			return probeScript.Run(ctx, f.rdb, key, 1, 1, 1, 1, f.channel, "payments").Int64Slice()
		}},
		{"restore closed v1", func() ([]int64, error) {
			return restoreScript.Run(ctx, f.rdb, key, 1, 0, 0, f.channel, "payments").Int64Slice()
		}},
	} {
		r, err := try.run()
		if err != nil || r[0] != 1 || r[1] != 1 || r[2] < 50000 {
			t.Errorf("%s: got %v %v, want v1 open still (~60s left)", try.name, r, err)
		}
	}
	waitFor(t, time.Second, "pod applies v1", func() bool { return c.view.Load().ver == 1 })
	if c.apply(0, false, 0, time.Now()); c.view.Load().ver != 1 || !c.view.Load().open {
		t.Errorf("a stale v0 closed message moved the view to %+v", c.view.Load())
	}
}

// TestHalfOpenProbesLeasedFleetWide: 5 pods, HALF_OPEN_PROBES=2: no round
// (one open version) sends more than 2 probes across the fleet, and the
// round that closes sends exactly 2.
func TestHalfOpenProbesLeasedFleetWide(t *testing.T) {
	srv := redistest.Start(t)
	s := testSettings
	s.openTimeout = 300 * time.Millisecond
	var pods []*circuit
	for range 5 {
		f, c := newPod(t, srv, "probes", s)
		waitFor(t, 2*time.Second, "sync", f.synced.Load)
		pods = append(pods, c)
	}
	r, err := tripScript.Run(context.Background(), pods[0].f.rdb, []string{pods[0].base + ":state"}, 0, 300, pods[0].f.channel, "payments").Int64Slice()
	if err != nil || r[0] != 1 {
		t.Fatalf("trip: %v %v", r, err)
	}
	var mu sync.Mutex
	probes := map[int64]int{} // open version -> probes sent
	healthy := atomic.Bool{}
	send := func(c *circuit) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			mu.Lock()
			probes[c.view.Load().ver]++
			mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			if healthy.Load() {
				return &http.Response{StatusCode: 200}, nil
			}
			return nil, errUpstream
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range pods {
		wg.Go(func() {
			for ctx.Err() == nil {
				c.Execute(send(c))
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	healthy.Store(true)
	waitFor(t, 3*time.Second, "fleet closed", func() bool {
		for _, c := range pods {
			if v := c.view.Load(); v.open {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	closedAt := pods[0].view.Load().ver // the closed version; its round was ver-1
	rounds := 0
	for ver, n := range probes {
		if ver == 0 || ver >= closedAt {
			continue // closed: ordinary calls (v0: before the pod saw the trip)
		}
		rounds++
		if n > s.probes {
			t.Errorf("open version %d: %d probes fleet-wide, want <= %d", ver, n, s.probes)
		}
	}
	if got := probes[closedAt-1]; got != s.probes {
		t.Errorf("the round that closed sent %d probes, want %d", got, s.probes)
	}
	if rounds < 3 {
		t.Errorf("%d half-open rounds in 1.5s of a dead upstream (open 300ms), want >= 3", rounds)
	}
	t.Logf("probes per open version: %v (closed at v%d)", probes, closedAt)
}

// TestDegradedAndResync: Redis killed, restarted empty, paused: calls
// never wait, the pods go local, and come back in sync with the state
// they had (an open that Redis forgot is written back).
func TestDegradedAndResync(t *testing.T) {
	srv := redistest.Start(t)
	var fleets []*Fleet
	var pods []*circuit
	for range 2 {
		f, c := newPod(t, srv, "degraded", testSettings)
		waitFor(t, 2*time.Second, "sync", f.synced.Load)
		fleets, pods = append(fleets, f), append(pods, c)
	}
	if _, err := tripScript.Run(context.Background(), fleets[0].rdb, []string{pods[0].base + ":state"}, 0, 60000, fleets[0].channel, "payments").Result(); err != nil {
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
		d := waitFor(t, 2*time.Second, "in sync after restart", func() bool { return f.Sync().Synced })
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
		d := waitFor(t, 2*time.Second, "in sync after resume", func() bool { return f.Sync().Synced })
		t.Logf("in sync %v after resume", d)
	}
}
