package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// The helpers of the resilience tests (breaker, bulkhead, isolation,
// connections, leaks) carry the prefix "resil" so that they cannot clash
// with the helpers of the package's other test files.

// resilBound bounds every call that is expected to complete; calls expected
// to fail on a deadline use much shorter, explicit bounds.
const resilBound = 10 * time.Second

// resilRegistry sets env for the test and builds a registry from it. The
// caller must defer r.Close().
func resilRegistry(t *testing.T, env map[string]string) *Registry {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	r, err := FromEnv()
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	return r
}

// resilResult is the outcome of one call: the status and whole body of the
// response, or the call's error.
type resilResult struct {
	status int
	body   string
	err    error
	took   time.Duration
}

func (r resilResult) String() string {
	if r.err != nil {
		return fmt.Sprintf("error after %v: %v", r.took, r.err)
	}
	return fmt.Sprintf("status %d after %v, body %q", r.status, r.took, resilShorten(r.body))
}

func resilShorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// resilGet sends GET path through c, bounded by d, and reads and closes the
// body.
func resilGet(c *Client, path string, d time.Duration) resilResult {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return resilGetCtx(ctx, c, path)
}

// resilGetCtx is resilGet under the caller's ctx, which must be bounded.
func resilGetCtx(ctx context.Context, c *Client, path string) resilResult {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return resilResult{err: err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return resilResult{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resilResult{status: resp.StatusCode, body: string(b), err: err, took: time.Since(start)}
}

// resilGo runs resilGet in a goroutine and delivers the result on the
// returned channel (buffered: the goroutine never blocks on it).
func resilGo(c *Client, path string, d time.Duration) <-chan resilResult {
	ch := make(chan resilResult, 1)
	go func() { ch <- resilGet(c, path, d) }()
	return ch
}

// resilRecv waits for one result, at most d.
func resilRecv(t *testing.T, ch <-chan resilResult, d time.Duration) resilResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("no result within %v", d)
		return resilResult{}
	}
}

// resilEventually polls cond every 5ms until it holds, failing the test if
// it does not within d.
func resilEventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// resilWaitParked waits, at most resilBound, until n requests are parked
// at g.
func resilWaitParked(t *testing.T, g *outboundtest.Hang, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), resilBound)
	defer cancel()
	if err := g.WaitFor(ctx, n); err != nil {
		t.Fatalf("waiting for %d requests parked at the gate (parked now: %d): %v", n, g.Waiting(), err)
	}
}

// resilAsError returns the *Error in err's chain, failing the test
// if there is none.
func resilAsError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) does not wrap a *Error", err, err)
	}
	return e
}

// resilStatusHandler answers /status/<code> with that code and a short
// body.
func resilStatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if err != nil {
			code = http.StatusOK
		}
		w.Header().Set("Content-Length", "4")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "body")
	})
}

// A 5xx storm opens the breaker exactly when BREAKER_MIN_REQUESTS attempts
// have been judged; from then on calls fail fast, without I/O, with an
// error naming the system.
func TestBreakerStormOpensAfterMinRequests(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "down"})
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":          "inv",
		"INV_BASE_URL":              srv.URL,
		"INV_BREAKER_MIN_REQUESTS":  "5",
		"INV_BREAKER_FAILURE_RATIO": "0.5",
		"INV_RETRIES":               "0",
	})
	defer r.Close()
	c := r.MustClient("inv")

	for i := 1; i <= 5; i++ {
		res := resilGet(c, "/stock/42", resilBound)
		if res.err != nil || res.status != http.StatusServiceUnavailable {
			t.Fatalf("call %d: %v, want the 503 response", i, res)
		}
		st := c.Status()
		if want := observe.BreakerClosed; i < 5 && st.Breaker != want {
			t.Fatalf("after %d failures (min 5): breaker %s, want %s", i, st.Breaker, want)
		}
		if i < 5 && st.BreakerCounts.Failures != uint32(i) {
			t.Fatalf("after %d failures: BreakerCounts %+v, want %d failures", i, st.BreakerCounts, i)
		}
	}
	if got := srv.Hits(); got != 5 {
		t.Fatalf("server hits after the storm = %d, want 5", got)
	}
	if st := c.Status(); st.Breaker != observe.BreakerOpen {
		t.Fatalf("after 5 failures: breaker %s, want open", st.Breaker)
	}

	const fastCalls = 100
	for i := 1; i <= fastCalls; i++ {
		res := resilGet(c, "/stock/42", resilBound)
		if res.err == nil {
			t.Fatalf("call %d while open: %v, want an error", 5+i, res)
		}
		if !errors.Is(res.err, ErrCircuitOpen) || !errors.Is(res.err, gobreaker.ErrOpenState) {
			t.Fatalf("call %d while open: %v, want ErrCircuitOpen and gobreaker.ErrOpenState", 5+i, res.err)
		}
		if errors.Is(res.err, gobreaker.ErrTooManyRequests) {
			t.Fatalf("call %d while open: %v matches ErrTooManyRequests, want ErrOpenState only", 5+i, res.err)
		}
		e := resilAsError(t, res.err)
		if e.System != "inv" || e.Op != observe.OpBreaker || e.Attempts != 0 {
			t.Fatalf("call %d while open: Error{System %q, Op %q, Attempts %d}, want inv, breaker, 0", 5+i, e.System, e.Op, e.Attempts)
		}
		if !strings.Contains(res.err.Error(), "outbound inv") {
			t.Fatalf("error %q does not name the system", res.err)
		}
		if res.took > 2*time.Second {
			t.Fatalf("call %d while open took %v, want a fast failure", 5+i, res.took)
		}
	}
	if got := srv.Requests(); got != 5 {
		t.Fatalf("server requests after %d calls while open = %d, want still 5", fastCalls, got)
	}
	st := c.Status()
	if st.Breaker != observe.BreakerOpen || st.BreakerRejected != fastCalls || st.Calls != 5 || st.InFlight != 0 {
		t.Fatalf("status = breaker %s, rejected %d, calls %d, in flight %d; want open, %d, 5, 0",
			st.Breaker, st.BreakerRejected, st.Calls, st.InFlight, fastCalls)
	}
	t.Logf("5 requests reached the server; %d calls while open failed fast with %q", fastCalls, "outbound inv: breaker: ...")
}

// After BREAKER_OPEN_TIMEOUT the breaker lets exactly
// BREAKER_HALF_OPEN_PROBES probes through; when they all succeed it closes,
// and a failing probe opens it again.
func TestBreakerHalfOpenProbes(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		gate.ServeHTTP(w, r)
	}))
	const openTimeout = 300 * time.Millisecond
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":             "inv",
		"INV_BASE_URL":                 srv.URL,
		"INV_BREAKER_MIN_REQUESTS":     "2",
		"INV_BREAKER_FAILURE_RATIO":    "0.5",
		"INV_BREAKER_OPEN_TIMEOUT":     openTimeout.String(),
		"INV_BREAKER_HALF_OPEN_PROBES": "2",
		"INV_RETRIES":                  "0",
	})
	defer r.Close()
	c := r.MustClient("inv")

	// trip sends n failing calls; the breaker must open on the last one.
	trip := func(n int) {
		t.Helper()
		for i := 1; i <= n; i++ {
			if st := c.Status(); st.Breaker != observe.BreakerClosed {
				t.Fatalf("before tripping call %d of %d: breaker %s, want closed", i, n, st.Breaker)
			}
			if res := resilGet(c, "/x", resilBound); res.err != nil || res.status != http.StatusServiceUnavailable {
				t.Fatalf("tripping call %d: %v, want 503", i, res)
			}
		}
		if st := c.Status(); st.Breaker != observe.BreakerOpen {
			t.Fatalf("after %d failures: breaker %s, want open", n, st.Breaker)
		}
	}
	waitHalfOpen := func() time.Duration {
		t.Helper()
		start := time.Now()
		resilEventually(t, 20*openTimeout+5*time.Second, "breaker half-open", func() bool {
			return c.Status().Breaker == observe.BreakerHalfOpen
		})
		return time.Since(start)
	}

	// Open, then half-open: two probes go through and park at the gate; a
	// third call is refused without I/O.
	trip(2)
	openedAt := srv.Requests()
	if res := resilGet(c, "/x", resilBound); !errors.Is(res.err, gobreaker.ErrOpenState) {
		t.Fatalf("call right after tripping: %v, want ErrOpenState", res)
	}
	waited := waitHalfOpen()
	failing.Store(false)
	probes := []<-chan resilResult{resilGo(c, "/probe", resilBound), resilGo(c, "/probe", resilBound)}
	resilWaitParked(t, gate, 2)
	res := resilGet(c, "/x", resilBound)
	if !errors.Is(res.err, ErrCircuitOpen) || !errors.Is(res.err, gobreaker.ErrTooManyRequests) {
		t.Fatalf("third call while 2 probes are in flight: %v, want ErrCircuitOpen and ErrTooManyRequests", res)
	}
	if e := resilAsError(t, res.err); e.System != "inv" || e.Op != observe.OpBreaker {
		t.Fatalf("third call: Error{System %q, Op %q}, want inv, breaker", e.System, e.Op)
	}
	if got := srv.Requests(); got != openedAt+2 {
		t.Fatalf("server requests = %d, want %d (the 2 probes only)", got, openedAt+2)
	}
	gate.Release()
	for i, ch := range probes {
		if res := resilRecv(t, ch, resilBound); res.err != nil || res.status != http.StatusOK {
			t.Fatalf("probe %d: %v, want 200", i+1, res)
		}
	}
	if st := c.Status(); st.Breaker != observe.BreakerClosed {
		t.Fatalf("after 2 successful probes: breaker %s, want closed", st.Breaker)
	}
	for i := range 5 {
		if res := resilGet(c, "/x", resilBound); res.err != nil || res.status != http.StatusOK {
			t.Fatalf("call %d after closing: %v, want 200", i+1, res)
		}
	}

	// Open again (closing started a new window, which now holds the 5
	// calls that succeeded: the 5th failure makes the ratio 0.5), and this
	// time the first probe fails and the breaker opens again at once.
	failing.Store(true)
	trip(5)
	waitHalfOpen()
	before := srv.Requests()
	if res := resilGet(c, "/x", resilBound); res.err != nil || res.status != http.StatusServiceUnavailable {
		t.Fatalf("failing probe: %v, want its 503", res)
	}
	if st := c.Status(); st.Breaker != observe.BreakerOpen {
		t.Fatalf("after a failing probe: breaker %s, want open", st.Breaker)
	}
	for range 10 {
		if res := resilGet(c, "/x", resilBound); !errors.Is(res.err, gobreaker.ErrOpenState) {
			t.Fatalf("call after the failing probe: %v, want ErrOpenState", res)
		}
	}
	if got := srv.Requests(); got != before+1 {
		t.Fatalf("server requests = %d, want %d (the failing probe only)", got, before+1)
	}
	t.Logf("open -> half-open after %v (open timeout %v); 2 probes let through, the 3rd refused", waited, openTimeout)
}

// Calls that the caller cancels, or whose caller deadline (less the
// reserve) passes, while the server is slow are neither successes nor
// failures: the breaker stays closed with no failures.
func TestBreakerIgnoresCallerCancellation(t *testing.T) {
	gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	srv := outboundtest.NewUpstream(t, gate)
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":          "inv",
		"INV_BASE_URL":              srv.URL,
		"INV_BREAKER_MIN_REQUESTS":  "5",
		"INV_BREAKER_FAILURE_RATIO": "0.5",
		"INV_RETRIES":               "2",
		"INV_BACKOFF_BASE":          "1ms",
		"INV_BACKOFF_MAX":           "1ms",
	})
	defer r.Close()
	c := r.MustClient("inv")

	const perRound = 10
	excluded := 0
	waitGateEmpty := func() {
		t.Helper()
		resilEventually(t, resilBound, "gate empty", func() bool { return gate.Waiting() == 0 })
	}
	// Three rounds cancelled by the caller.
	for round := 1; round <= 3; round++ {
		waitGateEmpty()
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		chs := make([]chan resilResult, perRound)
		for i := range chs {
			chs[i] = make(chan resilResult, 1)
			go func() { chs[i] <- resilGetCtx(ctx, c, "/slow") }()
		}
		resilWaitParked(t, gate, perRound)
		cancel()
		for i, ch := range chs {
			res := resilRecv(t, ch, resilBound)
			if !errors.Is(res.err, context.Canceled) {
				t.Fatalf("round %d call %d: %v, want context.Canceled", round, i+1, res)
			}
			if e := resilAsError(t, res.err); e.Op != observe.OpCanceled || e.Attempts != 1 {
				t.Fatalf("round %d call %d: Op %q after %d attempts, want canceled after 1", round, i+1, e.Op, e.Attempts)
			}
		}
		excluded += perRound
	}
	// One round whose caller deadline passes so soon that the attempt had
	// no fair chance: 150ms less the 100ms reserve leaves 50ms, under
	// minFairAttempt (100ms). Longer cuts count: see
	// TestBreakerOpensWhenBudgetsCutAHungUpstream.
	waitGateEmpty()
	chs := make([]<-chan resilResult, perRound)
	for i := range chs {
		chs[i] = resilGo(c, "/slow", 150*time.Millisecond)
	}
	for i, ch := range chs {
		res := resilRecv(t, ch, resilBound)
		if res.err == nil {
			t.Fatalf("deadline round call %d: %v, want an error", i+1, res)
		}
		if e := resilAsError(t, res.err); e.Op != observe.OpBudgetTimeout || !e.Timeout() {
			t.Fatalf("deadline round call %d: Op %q (%v), want budget timeout", i+1, e.Op, res.err)
		}
	}
	excluded += perRound

	st := c.Status()
	if st.Breaker != observe.BreakerClosed || st.BreakerCounts.Failures != 0 || st.BreakerCounts.Successes != 0 {
		t.Fatalf("after %d abandoned calls: breaker %s, counts %+v; want closed, 0 failures", excluded, st.Breaker, st.BreakerCounts)
	}
	if st.BreakerCounts.Exclusions != uint32(excluded) {
		t.Fatalf("BreakerCounts.Exclusions = %d, want %d", st.BreakerCounts.Exclusions, excluded)
	}
	if st.Retries != 0 || st.InFlight != 0 {
		t.Fatalf("status retries %d, in flight %d; want 0, 0 (abandoned calls are not retried)", st.Retries, st.InFlight)
	}
	gate.Release()
	if res := resilGet(c, "/fast", resilBound); res.err != nil || res.status != http.StatusOK {
		t.Fatalf("call after the gate opened: %v, want 200", res)
	}
	st = c.Status()
	if st.Breaker != observe.BreakerClosed || st.BreakerCounts.Successes != 1 || st.BreakerCounts.Failures != 0 {
		t.Fatalf("final: breaker %s, counts %+v; want closed, 1 success, 0 failures", st.Breaker, st.BreakerCounts)
	}
	t.Logf("%d abandoned calls (%d requests reached the server): breaker closed, counts %+v", excluded, srv.Requests(), st.BreakerCounts)
}

// 4xx answers are the caller's problem, not the upstream's: they count as
// successes. 408, 429 and 5xx count as failures.
func TestBreakerStatusClassification(t *testing.T) {
	srv := outboundtest.NewUpstream(t, resilStatusHandler())
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":         "inv",
		"INV_BASE_URL":             srv.URL,
		"INV_BREAKER_MIN_REQUESTS": "100000",
		"INV_RETRIES":              "0",
	})
	defer r.Close()
	c := r.MustClient("inv")

	tests := []struct {
		code    int
		failure bool
	}{
		{200, false}, {201, false}, {204, false},
		{400, false}, {401, false}, {403, false}, {404, false}, {409, false}, {422, false},
		{408, true}, {429, true},
		{500, true}, {501, true}, {502, true}, {503, true}, {504, true},
	}
	for _, tc := range tests {
		before := c.Status().BreakerCounts
		for range 3 {
			res := resilGet(c, "/status/"+strconv.Itoa(tc.code), resilBound)
			if res.err != nil || res.status != tc.code {
				t.Fatalf("GET /status/%d: %v, want that status as a response", tc.code, res)
			}
		}
		after := c.Status().BreakerCounts
		gotS, gotF := after.Successes-before.Successes, after.Failures-before.Failures
		wantS, wantF := uint32(3), uint32(0)
		if tc.failure {
			wantS, wantF = 0, 3
		}
		if gotS != wantS || gotF != wantF || after.Requests-before.Requests != 3 {
			t.Errorf("3 x %d: +%d successes, +%d failures, +%d requests; want +%d, +%d, +3",
				tc.code, gotS, gotF, after.Requests-before.Requests, wantS, wantF)
		}
	}
	if st := c.Status(); st.Breaker != observe.BreakerClosed {
		t.Fatalf("breaker %s, want closed (min requests not reached)", st.Breaker)
	}
}

// The breaker judges attempts, not calls: with RETRIES=2 one call against a
// 503 server is three attempts, and can open the breaker by itself.
func TestBreakerCountsAttempts(t *testing.T) {
	t.Run("three attempts counted", func(t *testing.T) {
		srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "down"})
		r := resilRegistry(t, map[string]string{
			"OUTBOUND_SYSTEMS":         "inv",
			"INV_BASE_URL":             srv.URL,
			"INV_BREAKER_MIN_REQUESTS": "100000",
			"INV_RETRIES":              "2",
			"INV_BACKOFF_BASE":         "1ms",
			"INV_BACKOFF_MAX":          "2ms",
		})
		defer r.Close()
		c := r.MustClient("inv")
		res := resilGet(c, "/x", resilBound)
		if res.err != nil || res.status != http.StatusServiceUnavailable {
			t.Fatalf("call: %v, want the last 503 once retries ran out", res)
		}
		if got := srv.Hits(); got != 3 {
			t.Fatalf("server hits = %d, want 3", got)
		}
		st := c.Status()
		if n := st.BreakerCounts; n.Requests != 3 || n.Failures != 3 || n.Successes != 0 {
			t.Fatalf("BreakerCounts = %+v, want 3 requests, 3 failures", n)
		}
		if st.Calls != 1 || st.Retries != 2 {
			t.Fatalf("status calls %d, retries %d; want 1, 2", st.Calls, st.Retries)
		}
	})
	t.Run("one call opens the breaker", func(t *testing.T) {
		srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "down"})
		r := resilRegistry(t, map[string]string{
			"OUTBOUND_SYSTEMS":         "inv",
			"INV_BASE_URL":             srv.URL,
			"INV_BREAKER_MIN_REQUESTS": "2",
			"INV_RETRIES":              "2",
			"INV_BACKOFF_BASE":         "1ms",
			"INV_BACKOFF_MAX":          "2ms",
		})
		defer r.Close()
		c := r.MustClient("inv")
		// Attempts 1 and 2 fail and open the breaker; attempt 3 is
		// refused without I/O, and the error keeps the last status.
		res := resilGet(c, "/x", resilBound)
		if !errors.Is(res.err, ErrCircuitOpen) || !errors.Is(res.err, gobreaker.ErrOpenState) {
			t.Fatalf("call: %v, want ErrCircuitOpen from the third attempt", res)
		}
		if !strings.Contains(res.err.Error(), "503") {
			t.Errorf("error %q does not mention the last status 503", res.err)
		}
		if got := srv.Hits(); got != 2 {
			t.Fatalf("server hits = %d, want 2", got)
		}
		if st := c.Status(); st.Breaker != observe.BreakerOpen || st.InFlight != 0 {
			t.Fatalf("breaker %s, in flight %d; want open, 0", st.Breaker, st.InFlight)
		}
	})
}
