package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

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
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "down"})
	r := loadRegistry(t, map[string]string{
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
	if st.Breaker != observe.BreakerOpen || st.BreakerRefused != fastCalls || st.Calls != 5 || st.InFlight != 0 {
		t.Fatalf("status = breaker %s, rejected %d, calls %d, in flight %d; want open, %d, 5, 0",
			st.Breaker, st.BreakerRefused, st.Calls, st.InFlight, fastCalls)
	}
	t.Logf("5 requests reached the server; %d calls while open failed fast with %q", fastCalls, "outbound inv: breaker: ...")
}

// After BREAKER_OPEN_TIMEOUT the breaker lets exactly
// BREAKER_HALF_OPEN_PROBES probes through; when they all succeed it closes,
// and a failing probe opens it again.
func TestBreakerHalfOpenProbes(t *testing.T) {
	t.Parallel()
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
	r := loadRegistry(t, map[string]string{
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
		testutil.Eventually(t, 20*openTimeout+5*time.Second, "breaker half-open", func() bool {
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
	t.Parallel()
	gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	srv := outboundtest.NewUpstream(t, gate)
	r := loadRegistry(t, map[string]string{
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
		testutil.Eventually(t, resilBound, "gate empty", func() bool { return gate.Waiting() == 0 })
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
	// no fair chance: 190ms less the 100ms reserve leaves 90ms, under
	// MinFairAttempt (100ms) however late the call starts, and a call has
	// 90ms to get from its deadline to the budget check before it is
	// refused there instead (on a loaded machine 50ms was not enough).
	// Longer cuts count: see TestBreakerOpensWhenBudgetsCutAHungUpstream.
	waitGateEmpty()
	chs := make([]<-chan resilResult, perRound)
	for i := range chs {
		chs[i] = resilGo(c, "/slow", 190*time.Millisecond)
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
	t.Parallel()
	srv := outboundtest.NewUpstream(t, resilStatusHandler())
	r := loadRegistry(t, map[string]string{
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
	t.Parallel()
	t.Run("three attempts counted", func(t *testing.T) {
		srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "down"})
		r := loadRegistry(t, map[string]string{
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
		r := loadRegistry(t, map[string]string{
			"OUTBOUND_SYSTEMS":         "inv",
			"INV_BASE_URL":             srv.URL,
			"INV_BREAKER_MIN_REQUESTS": "2",
			"INV_RETRIES":              "2",
			"INV_BACKOFF_BASE":         "1ms",
			"INV_BACKOFF_MAX":          "2ms",
		})
		defer r.Close()
		c := r.MustClient("inv")
		// Attempts 1 and 2 fail and open the breaker; attempt 3 is not
		// sent, and the caller gets the last 503, as when retries run
		// out.
		res := resilGet(c, "/x", resilBound)
		if res.err != nil || res.status != http.StatusServiceUnavailable || res.body != "down" {
			t.Fatalf("call: %v, want the last 503 once the breaker would refuse the third attempt", res)
		}
		if got := srv.Hits(); got != 2 {
			t.Fatalf("server hits = %d, want 2", got)
		}
		if st := c.Status(); st.Breaker != observe.BreakerOpen || st.InFlight != 0 {
			t.Fatalf("breaker %s, in flight %d; want open, 0", st.Breaker, st.InFlight)
		}
	})
}

// countingCircuit stands in for a fleet's breaker: it passes every
// attempt to the local breaker and counts the verdicts of Judge.
type countingCircuit struct {
	local Circuit
	mu    sync.Mutex
	seen  map[observe.Verdict]int
}

func (c *countingCircuit) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	resp, err := c.local.Execute(send)
	c.mu.Lock()
	c.seen[breaker.Judge(err)]++
	c.mu.Unlock()
	return resp, err
}

func (c *countingCircuit) State() gobreaker.State { return c.local.State() }

func (c *countingCircuit) Counts() gobreaker.Counts { return c.local.Counts() }

func (c *countingCircuit) FleetSync() observe.FleetSync {
	return observe.FleetSync{Synced: false, Since: time.Unix(1, 0), LastError: "redis down"}
}

func fleetEnv(baseURL string) map[string]string {
	return map[string]string{
		"OUTBOUND_SYSTEMS":         "pay,inv",
		"PAY_BASE_URL":             baseURL,
		"PAY_RETRIES":              "0",
		"PAY_BREAKER_SCOPE":        "fleet",
		"INV_BASE_URL":             baseURL,
		"OUTBOUND_FLEET_REDIS_URL": "redis://127.0.0.1:1",
		"OUTBOUND_FLEET_NAMESPACE": "test",
	}
}

// A system at BREAKER_SCOPE=fleet gets the fleet's circuit,
// which wraps the system's own; a system at scope local keeps its own.
// The stand-in counts with Judge as the local breaker does, and its sync
// state shows in Status.
func TestFleetCircuitWrapsTheLocalBreaker(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable}, outboundtest.Reply{Body: "ok"})
	loaded, err := config.LoadEnv(fleetEnv(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	var wrapped []string
	var fc *countingCircuit
	r, err := New(loaded, WithFleet(circuitFleet(func(system string, s config.Client, local Circuit) (Circuit, error) {
		wrapped = append(wrapped, system)
		if s.BreakerScope != "fleet" || local == nil {
			t.Errorf("wrap got scope %q, local %v", s.BreakerScope, local)
		}
		fc = &countingCircuit{local: local, seen: map[observe.Verdict]int{}}
		return fc, nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(wrapped) != 1 || wrapped[0] != "pay" {
		t.Fatalf("wrapped %v, want [pay]", wrapped)
	}
	pay := r.MustClient("pay")
	for range 2 {
		resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/")
		if err != nil {
			t.Fatal(err)
		}
		tbrRead(t, resp)
	}
	if fc.seen[observe.VerdictFailure] != 1 || fc.seen[observe.VerdictSuccess] != 1 {
		t.Errorf("verdicts %v, want one failure (503) and one success", fc.seen)
	}
	if st := pay.Status(); st.Fleet == nil || st.Fleet.Synced || st.Fleet.LastError != "redis down" {
		t.Errorf("pay Status().Fleet = %+v, want the fleet's sync state", st.Fleet)
	}
	if st := r.MustClient("inv").Status(); st.Fleet != nil {
		t.Errorf("inv (scope local) Status().Fleet = %+v, want nil", st.Fleet)
	}
}

// A registry with a system at scope fleet and no fleet option refuses to
// build, naming the variable and the way out.
func TestFleetScopeWithoutFleetOptionRefusesToBuild(t *testing.T) {
	t.Parallel()
	loaded, err := config.LoadEnv(fleetEnv("http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]Option{nil, {WithFleet(nil)}} {
		r, err := New(loaded, opts...)
		if err == nil {
			r.Close()
			t.Fatal("New with a system at scope fleet and no fleet: no error")
		}
		if msg := err.Error(); !strings.Contains(msg, "PAY_BREAKER_SCOPE=fleet") || !strings.Contains(msg, "(*fleet.Fleet).Option()") {
			t.Errorf("error %q does not name the variable and the fleet option", msg)
		}
	}
}

// changeLog is an observer that keeps the breaker changes it is told.
type changeLog struct {
	mu sync.Mutex
	ev []string
}

func (*changeLog) ObserveAttempt(observe.AttemptEvent) {}

func (*changeLog) ObserveCall(observe.CallEvent) {}

func (l *changeLog) ObserveBreaker(system string, from, to observe.BreakerState) {
	l.mu.Lock()
	l.ev = append(l.ev, system+" "+string(from)+"->"+string(to))
	l.mu.Unlock()
}

func (l *changeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.ev, "; ")
}

// reportingCircuit is a countingCircuit that reports its own states: it
// keeps the local breaker's changes it is given and the registry's hook.
type reportingCircuit struct {
	*countingCircuit
	report func(from, to gobreaker.State)
	local  []string
}

func (c *reportingCircuit) ReportStates(report func(from, to gobreaker.State)) func(from, to gobreaker.State) {
	c.report = report
	return func(from, to gobreaker.State) { c.local = append(c.local, from.String()+"->"+to.String()) }
}

// A fleet circuit that is a StateReporter gets the registry's observer
// hook and the local breaker's changes, which no longer reach the
// observers directly (the circuit reports what its State shows, once);
// one that is not leaves the local breaker's changes to the observers.
func TestStateReporterCircuitReportsBreakerChanges(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	env := fleetEnv(srv.URL)
	env["PAY_BREAKER_MIN_REQUESTS"] = "1"
	loaded, err := config.LoadEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, reports := range []bool{false, true} {
		obs := &changeLog{}
		var rc *reportingCircuit
		r, err := New(loaded, WithObserver(obs), WithFleet(circuitFleet(func(_ string, _ config.Client, local Circuit) (Circuit, error) {
			cc := &countingCircuit{local: local, seen: map[observe.Verdict]int{}}
			if !reports {
				return cc, nil
			}
			rc = &reportingCircuit{countingCircuit: cc}
			return rc, nil
		})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		pay := r.MustClient("pay")
		resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/") // 503: the local breaker trips
		if err != nil {
			t.Fatal(err)
		}
		tbrRead(t, resp)
		if !reports {
			if got := obs.String(); got != "pay closed->open" {
				t.Errorf("no StateReporter: observer told %q, want the local breaker's change", got)
			}
			continue
		}
		if got := obs.String(); got != "" || rc.report == nil || strings.Join(rc.local, "; ") != "closed->open" {
			t.Fatalf("StateReporter: observer told %q, circuit given %q and hook %v; want nothing, closed->open, a hook", got, rc.local, rc.report != nil)
		}
		rc.report(gobreaker.StateOpen, gobreaker.StateHalfOpen)
		if got := obs.String(); got != "pay open->half-open" {
			t.Errorf("StateReporter: observer told %q, want what the circuit reported", got)
		}
	}
}

// fakeCircuit stands in for a fleet-shared breaker state: it refuses
// every attempt while open is set, and counts what it is told.
type fakeCircuit struct {
	open               atomic.Bool
	executed, refusals atomic.Int32
}

func (f *fakeCircuit) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	if f.open.Load() {
		f.refusals.Add(1)
		return nil, gobreaker.ErrOpenState
	}
	f.executed.Add(1)
	return send()
}

func (f *fakeCircuit) State() gobreaker.State {
	if f.open.Load() {
		return gobreaker.StateOpen
	}
	return gobreaker.StateClosed
}

func (f *fakeCircuit) Counts() gobreaker.Counts { return gobreaker.Counts{} }

// The breaker stage is a seam: another circuit (a fleet-shared state)
// plugs in without touching the other stages. Its verdicts reach the
// caller as the local breaker's would, with no I/O when it refuses, and a
// refusal mid-call (between retries) stops the retries.
func TestCircuitSeamTakesTheBreakersPlace(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable}, outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	f := &fakeCircuit{}
	useCircuit(c, f)

	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatal(err)
	}
	if tbrRead(t, resp) != "ok" || f.executed.Load() != 2 {
		t.Fatalf("503 then 200 through the fake circuit: %d attempts executed, want 2", f.executed.Load())
	}

	f.open.Store(true)
	hits := srv.Hits()
	_, _, err = tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	e := tbrError(t, err, observe.OpBreaker)
	if !errors.Is(err, ErrCircuitOpen) || srv.Hits() != hits {
		t.Errorf("%v: want ErrCircuitOpen and no request sent", e)
	}
	if st := c.Status(); st.Breaker != observe.BreakerOpen {
		t.Errorf("Status().Breaker = %s, want open (from the fake circuit)", st.Breaker)
	}
}

// A request net/http refuses before any I/O (an invalid header value) is
// the caller's bug: it is not retried and does not open the breaker.
func TestBadRequestNeitherRetriedNorCountedByBreaker(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":         "inv",
		"INV_BASE_URL":             srv.URL,
		"INV_BREAKER_MIN_REQUESTS": "2",
		"INV_BACKOFF_BASE":         "1ms",
		"INV_BACKOFF_MAX":          "1ms",
	})
	defer r.Close()
	c := r.MustClient("inv")
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/x", nil)
		req.Header.Set("X-Bad", "a\nb")
		_, err := c.Do(req)
		cancel()
		if e := resilAsError(t, err); e.Op != observe.OpRequest || e.Attempts != 1 {
			t.Fatalf("Op %q after %d attempts (%v), want request after 1", e.Op, e.Attempts, err)
		}
	}
	if st := c.Status(); st.Breaker != observe.BreakerClosed || st.BreakerCounts.Failures != 0 || st.Retries != 0 {
		t.Fatalf("breaker %s, counts %+v, retries %d; want closed, no failures, no retries", st.Breaker, st.BreakerCounts, st.Retries)
	}
	if res := resilGet(c, "/ok", resilBound); res.err != nil || res.status != 200 {
		t.Fatalf("good call after bad ones: %v", res)
	}
}

// Every caller brings a short budget (as with X-Time-Budget) and the
// upstream hangs: the attempts the budgets cut are attempt timeouts, and
// the breaker opens, so later calls fail fast instead of each waiting.
func TestBreakerOpensWhenBudgetsCutAHungUpstream(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, outboundtest.NewHang(nil))
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":          "inv",
		"INV_BASE_URL":              srv.URL,
		"INV_BREAKER_MIN_REQUESTS":  "3",
		"INV_BREAKER_FAILURE_RATIO": "0.5",
		"INV_BREAKER_OPEN_TIMEOUT":  "1h",
	})
	defer r.Close()
	c := r.MustClient("inv")
	for i := range 3 {
		res := resilGet(c, "/hang", 400*time.Millisecond) // 300ms after the reserve
		if e := resilAsError(t, res.err); e.Op != observe.OpBudgetTimeout {
			t.Fatalf("call %d: Op %q (%v), want budget timeout", i+1, e.Op, res.err)
		}
	}
	if st := c.Status(); st.Breaker != observe.BreakerOpen {
		t.Fatalf("breaker %s after 3 budget-cut attempts on a hung upstream, counts %+v; want open", st.Breaker, st.BreakerCounts)
	}
	res := resilGet(c, "/hang", 400*time.Millisecond)
	if !errors.Is(res.err, ErrCircuitOpen) || res.took > 100*time.Millisecond {
		t.Fatalf("call after the breaker opened: %v, want ErrCircuitOpen at once", res)
	}
}

// circuitFleet is a Fleet that gives the systems at BREAKER_SCOPE=fleet
// the Circuit its function returns, and no quota.
type circuitFleet func(system string, settings config.Client, local Circuit) (Circuit, error)

func (f circuitFleet) Circuit(sys FleetSystem, local Circuit) (Circuit, error) {
	return f(sys.Name, sys.Settings, local)
}

func (f circuitFleet) Quota(sys FleetSystem, _ Quota) (Quota, error) {
	return nil, errors.New("no quota in this fleet: " + sys.Name)
}

// useCircuit puts cb in the place of c's breaker, and rebuilds the
// system's stages, which hold it.
func useCircuit(c *Client, cb Circuit) {
	c.cb = cb
	ps, err := c.policies(c.pol.Load().l, c.pol.Load().quota, nil)
	if err != nil {
		panic(err)
	}
	c.pol.Store(ps)
}

// TestRetryRefusedByTheBreakerReturnsTheLastResponse checks that when a
// call's own attempt opens the breaker and the breaker would refuse its
// retry, the caller gets the response that was received (the upstream's
// 503, body readable), as when retries run out, through Do and
// HTTPClient alike; and the call is counted as one that sent a request and
// gave up, never as a refusal.
func TestRetryRefusedByTheBreakerReturnsTheLastResponse(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"Do", "HTTPClient"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "upstream down"})
			obs := &tbrObserver{}
			reg := loadRegistry(t, payEnv(up.URL, "RETRIES", "2", "BREAKER_MIN_REQUESTS", "1", "BREAKER_FAILURE_RATIO", "0.5",
				"BREAKER_OPEN_TIMEOUT", "1h"), WithObserver(obs))
			c := reg.MustClient("pay")
			send := c.Do
			if via == "HTTPClient" {
				send = c.HTTPClient().Do
			}
			status, h, body, err := sendRead(tbrCtx(t, 10*time.Second), t, send, http.MethodGet, "/x", nil)
			if err != nil || status != http.StatusServiceUnavailable || !strings.Contains(body, "upstream down") {
				t.Fatalf("got %d %q, %v; want the upstream's 503 with its body", status, body, err)
			}
			if h.Get(RefusedHeader) != "" || Refusal(h) != nil {
				t.Errorf("the upstream's answer came back marked as a refusal: %v", h)
			}
			if via == "HTTPClient" && (h.Get("X-Should-Retry") != "false" || h.Get("Stripe-Should-Retry") != "false") {
				t.Errorf("HTTPClient's answer does not tell the SDK that outbound gave up: %v", h)
			}
			if n := up.Requests(); n != 1 {
				t.Errorf("the upstream got %d requests, want 1 (the retry refused by the open breaker)", n)
			}
			st := c.Status()
			if st.Breaker != observe.BreakerOpen || st.Sent != 1 || st.GaveUp != 1 || st.BreakerRefused != 0 ||
				st.Outcomes["gave_up"] != 1 || st.Outcomes["breaker_open"] != 0 {
				t.Errorf("Status: breaker %s, sent %d, gave up %d, breaker rejected %d, outcomes %v; want open, 1 sent, 1 gave up, no refusal",
					st.Breaker, st.Sent, st.GaveUp, st.BreakerRefused, st.Outcomes)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if len(obs.calls) != 1 || obs.calls[0].Outcome != observe.OutcomeGaveUp || obs.calls[0].Attempts != 1 ||
				obs.calls[0].Status != http.StatusServiceUnavailable {
				t.Errorf("observers saw %+v, want one call that gave up after 1 attempt on status 503", obs.calls)
			}
		})
	}
}

// TestLocalCircuitIsOpenExactlyWhenItsStateSaysSo drives a system's own
// breaker through every change of state, the open time passing included,
// and checks that the entry's question (circuitOpen, which reads the
// state its hook kept) answers as the breaker's own State does.
func TestLocalCircuitIsOpenExactlyWhenItsStateSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Client{BreakerMinRequests: 1, BreakerFailureRatio: 0.5, BreakerWindow: 10 * time.Second,
			BreakerOpenTimeout: time.Second, BreakerHalfOpenProbes: 1}
		var changes []gobreaker.State
		lc := newLocalCircuit("s", cfg, nil, func(_, to gobreaker.State) { changes = append(changes, to) })
		outcome := func(err error) {
			_, _ = lc.Execute(func() (*http.Response, error) { return nil, err })
		}
		check := func(step string, want gobreaker.State) {
			t.Helper()
			// circuitOpen first: once the open time passed, it is what
			// turns the breaker half-open.
			if got := circuitOpen(lc); got != (want == gobreaker.StateOpen) {
				t.Errorf("%s: circuitOpen = %v, want %v (state %v)", step, got, !got, want)
			}
			if got := lc.State(); got != want {
				t.Errorf("%s: State = %v, want %v", step, got, want)
			}
		}
		check("new", gobreaker.StateClosed)
		outcome(nil)
		check("after a success", gobreaker.StateClosed)
		outcome(breaker.ErrFailedStatus)
		check("tripped", gobreaker.StateOpen)
		time.Sleep(time.Second - time.Nanosecond)
		check("a moment before the open time ends", gobreaker.StateOpen)
		time.Sleep(2 * time.Nanosecond)
		check("open time passed", gobreaker.StateHalfOpen)
		outcome(breaker.ErrFailedStatus)
		check("probe failed", gobreaker.StateOpen)
		time.Sleep(time.Second + time.Nanosecond)
		check("open time passed again", gobreaker.StateHalfOpen)
		outcome(nil)
		check("probe succeeded", gobreaker.StateClosed)
		want := []gobreaker.State{gobreaker.StateOpen, gobreaker.StateHalfOpen, gobreaker.StateOpen, gobreaker.StateHalfOpen, gobreaker.StateClosed}
		if !slices.Equal(changes, want) {
			t.Errorf("changes = %v, want %v", changes, want)
		}
	})
}
