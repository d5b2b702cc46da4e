package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

var errUpstream = errors.New("upstream failed")

func testJudge(err error) observe.Verdict {
	switch {
	case err == nil:
		return observe.VerdictSuccess
	case errors.Is(err, registry.ErrCircuitOpen), err == errExcludedForTest:
		return observe.VerdictExcluded
	}
	return observe.VerdictFailure
}

var testSettings = settings{system: "payments", minRequests: 20, ratio: 0.5, window: 30 * time.Second, openTimeout: 2 * time.Second, probes: 2, callTimeout: time.Second}

// testLocal is a pod's own breaker of s, as the registry gives it to
// the fleet: gobreaker, its refusals matching registry.ErrCircuitOpen.
func testLocal(s settings) testBreaker {
	return testBreaker{gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		MaxRequests: uint32(s.probes), Interval: s.window, BucketPeriod: s.window / 10, Timeout: s.openTimeout,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			j := n.TotalSuccesses + n.TotalFailures
			return j >= uint32(s.minRequests) && float64(n.TotalFailures) >= s.ratio*float64(j)
		},
	})}
}

type testBreaker struct {
	cb *gobreaker.CircuitBreaker[*http.Response]
}

func (b testBreaker) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	resp, err := b.cb.Execute(send)
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, fmt.Errorf("%w (local: %w)", registry.ErrCircuitOpen, err)
	}
	return resp, err
}

func (b testBreaker) Breaker() (observe.BreakerState, observe.BreakerCounts) {
	st := observe.BreakerClosed
	switch b.cb.State() {
	case gobreaker.StateOpen:
		st = observe.BreakerOpen
	case gobreaker.StateHalfOpen:
		st = observe.BreakerHalfOpen
	}
	n := b.cb.Counts()
	return st, observe.BreakerCounts{Requests: n.Requests, Successes: n.TotalSuccesses, Failures: n.TotalFailures}
}

// testReports counts with testJudge and tells nobody.
var testReports = reports{judge: testJudge}

// stateOf is c's state now.
func stateOf(c *circuit) observe.BreakerState {
	st, _ := c.Breaker()
	return st
}

// pod is one fleet with one system, "payments".
func newPod(t *testing.T, srv *redistest.Server, ns string, s settings) (*Fleet, *circuit) {
	t.Helper()
	return newPodWith(t, Config{RedisURL: srv.URL(), Namespace: ns, FlushInterval: 50 * time.Millisecond, Timeout: testTimeout}, s)
}

// testTimeout is the test pods' Config.Timeout, each round trip's bound:
// 1s rather than 100ms, so that a starved scheduler does not fail every
// round trip and leave a pod out of sync for good; what a short timeout
// does is the degraded and resync tests' to show.
const testTimeout = time.Second

// newPodWith is newPod with the fleet's configuration cfg.
func newPodWith(t *testing.T, cfg Config, s settings) (*Fleet, *circuit) {
	t.Helper()
	f, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := f.add(s, testLocal(s), testReports)
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

// runOp runs the op that call makes of the arguments every op of c's
// breaker begins with, alone in a batch.
//
// A round trip whose dial timed out (a starved machine runs it past the
// pod's Timeout) sent nothing: it is tried again, for up to syncWait. A
// refused dial (Redis down) is returned.
func runOp(c *circuit, call func(breakerArgs) opCall) ([]int64, error) {
	var got []int64
	var gerr error
	b := breakerArgs{base: c.base, channel: c.f.channel, system: c.name, open: c.openTimeout}
	for start := time.Now(); ; {
		err := c.f.runOps(context.Background(), newOp(call(b), func(r []int64, err error) { got, gerr = r, err }, nil))
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" && op.Timeout() && time.Since(start) < syncWait {
			continue
		}
		if err != nil {
			return nil, err
		}
		return got, gerr
	}
}

// runAlone runs the op of c alone in a call of the batch script on rdb,
// and returns its reply.
func runAlone(rdb *redis.Client, c opCall) ([]int64, error) {
	b := &batch{ops: []*op{newOp(c, nil, nil)}}
	keys, argv := b.args(false)
	rs, err := batchScript.Run(context.Background(), rdb, keys, argv...).Slice()
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		return nil, errShape
	}
	r, ok := int64s(rs[0])
	if !ok {
		return nil, errShape
	}
	return r, nil
}

// tripOf, probeOf and restoreOf are the ops of their names on version v.
func tripOf(v int64) func(breakerArgs) opCall {
	return func(b breakerArgs) opCall { return tripCall{breakerArgs: b, version: v} }
}

func probeOf(v int64, ok bool, probes int) func(breakerArgs) opCall {
	return func(b breakerArgs) opCall { return probeCall{breakerArgs: b, version: v, ok: ok, probes: probes} }
}

func restoreOf(v int64, open bool, left time.Duration) func(breakerArgs) opCall {
	return func(b breakerArgs) opCall { return restoreCall{breakerArgs: b, version: v, open: open, left: left} }
}
