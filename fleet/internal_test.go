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

var errUpstream = errors.New("upstream failed")

func testJudge(err error) verdict {
	switch {
	case err == nil:
		return verdictSuccess
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		return verdictExcluded
	}
	return verdictFailure
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

func TestStaleWriterCannotCloseNewerOpen(t *testing.T) {
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
