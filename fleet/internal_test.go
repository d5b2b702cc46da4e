package fleet

import (
	"context"
	"errors"
	"net/http"
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

var testSettings = settings{system: "payments", minRequests: 20, ratio: 0.5, window: 30 * time.Second, openTimeout: 2 * time.Second, probes: 2, callTimeout: time.Second}

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
	c, err := f.add(s, testLocal(s), testJudge)
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

// syncWait is how long a test waits for a fleet to reach Redis or for
// its shares to settle: long enough for a starved machine (the wait ends
// as soon as the condition holds; how long it took is not what the test
// judges).
const syncWait = 30 * time.Second

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

// runOp runs the op name on c's state, alone in a batch, args after the
// four arguments every op of a breaker takes (scripts.go).
func runOp(c *circuit, name string, args ...any) ([]int64, error) {
	argv := append([]any{c.base, c.f.channel, c.name, c.openTimeout.Milliseconds()}, args...)
	var got []int64
	var gerr error
	err := c.f.runOps(context.Background(), &op{name: name, keys: c.keys(name), args: argv,
		done: func(r []int64, err error) { got, gerr = r, err }})
	if err != nil {
		return nil, err
	}
	return got, gerr
}
