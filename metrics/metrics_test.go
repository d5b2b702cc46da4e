package metrics_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScriptedSequence drives a real loopback upstream through a success
// under a caller deadline, a spent budget, a retried 503, a full bulkhead
// and a 5xx storm that opens the breaker, then checks every metric, the
// untouched system's zero series included.
func TestScriptedSequence(t *testing.T) {
	srv, gate := upstream(t)
	t.Setenv("OUTBOUND_SYSTEMS", "inv,pay")
	t.Setenv("INV_BASE_URL", srv.URL)
	t.Setenv("INV_MAX_CONCURRENT", "1")
	t.Setenv("INV_RETRIES", "1")
	t.Setenv("INV_BACKOFF_BASE", "1ms")
	t.Setenv("INV_BACKOFF_MAX", "2ms")
	t.Setenv("INV_BREAKER_MIN_REQUESTS", "4")
	t.Setenv("INV_BREAKER_OPEN_TIMEOUT", "1h")
	t.Setenv("PAY_BASE_URL", "http://127.0.0.1:1") // never called

	promReg := prometheus.NewPedanticRegistry()
	m := metrics.New(promReg)
	r, err := registry.FromEnvWith(nil, registry.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := m.Watch(r); err != nil {
		t.Fatal(err)
	}
	inv := r.MustClient("inv")
	bg := context.Background()

	// 1. A success under a caller deadline shorter than CALL_TIMEOUT:
	// its deadline comes from the budget (budget_capped).
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	if st, err := get(ctx, inv, "/ok"); err != nil || st != 200 {
		t.Fatalf("ok: %d, %v", st, err)
	}
	cancel()
	// 2. A budget already spent: refused before any I/O.
	ctx, cancel = context.WithTimeout(bg, 50*time.Millisecond)
	if _, err := get(ctx, inv, "/ok"); !errors.Is(err, capbudget.ErrExhausted) {
		t.Fatalf("spent budget: %v, want capbudget.ErrExhausted", err)
	}
	cancel()
	// 3. A 503 retried into a 200.
	if st, err := get(bg, inv, "/flaky"); err != nil || st != 200 {
		t.Fatalf("flaky: %d, %v", st, err)
	}
	// 4. A full bulkhead: the only permit is held at the gate.
	parked := make(chan error, 1)
	gctx, gcancel := context.WithCancel(bg)
	defer gcancel()
	go func() {
		_, err := get(gctx, inv, "/gate")
		parked <- err
	}()
	wctx, wcancel := context.WithTimeout(bg, 10*time.Second)
	defer wcancel()
	if err := gate.WaitFor(wctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := gaugeValue(t, promReg, "outbound_bulkhead_in_flight", "inv"); got != 1 {
		t.Errorf("in flight with the gate held: %v, want 1", got)
	}
	if _, err := get(bg, inv, "/ok"); !errors.Is(err, bulkhead.ErrFull) {
		t.Fatalf("full bulkhead: %v, want bulkhead.ErrFull", err)
	}
	gate.Release()
	if err := <-parked; err != nil {
		t.Fatal(err)
	}
	// 5. A 5xx storm: with 3 successes and 1 failure judged, the two
	// 503s of one call (first attempt and its retry) make 3 of 6 and
	// open the breaker; the next call is refused.
	if st, err := get(bg, inv, "/down"); err != nil || st != 503 {
		t.Fatalf("down: %d, %v", st, err)
	}
	if s := inv.Status().Breaker; s != observe.BreakerOpen {
		t.Fatalf("breaker %s after the storm, want open", s)
	}
	if _, err := get(bg, inv, "/ok"); !errors.Is(err, registry.ErrCircuitOpen) {
		t.Fatalf("open breaker: %v, want ErrCircuitOpen", err)
	}

	const want = `
# HELP outbound_calls_total Outbound calls by how they ended (outcome: ok, failed, gave_up, breaker_open, forced_open, bulkhead_full, budget_spent, rate_limited, retry_throttled, canceled; the refusals sent nothing) and the class of the status the caller got (status_class 2xx..5xx; empty without one). failed is an answer the breaker counts as the upstream's failure (a 501).
# TYPE outbound_calls_total counter
outbound_calls_total{outcome="breaker_open",status_class="",system="inv"} 1
outbound_calls_total{outcome="breaker_open",status_class="",system="pay"} 0
outbound_calls_total{outcome="budget_spent",status_class="",system="inv"} 1
outbound_calls_total{outcome="budget_spent",status_class="",system="pay"} 0
outbound_calls_total{outcome="bulkhead_full",status_class="",system="inv"} 1
outbound_calls_total{outcome="bulkhead_full",status_class="",system="pay"} 0
outbound_calls_total{outcome="canceled",status_class="",system="inv"} 0
outbound_calls_total{outcome="canceled",status_class="",system="pay"} 0
outbound_calls_total{outcome="gave_up",status_class="",system="inv"} 0
outbound_calls_total{outcome="gave_up",status_class="4xx",system="inv"} 0
outbound_calls_total{outcome="gave_up",status_class="5xx",system="inv"} 1
outbound_calls_total{outcome="gave_up",status_class="",system="pay"} 0
outbound_calls_total{outcome="gave_up",status_class="4xx",system="pay"} 0
outbound_calls_total{outcome="gave_up",status_class="5xx",system="pay"} 0
outbound_calls_total{outcome="ok",status_class="2xx",system="inv"} 3
outbound_calls_total{outcome="ok",status_class="3xx",system="inv"} 0
outbound_calls_total{outcome="ok",status_class="4xx",system="inv"} 0
outbound_calls_total{outcome="ok",status_class="2xx",system="pay"} 0
outbound_calls_total{outcome="ok",status_class="3xx",system="pay"} 0
outbound_calls_total{outcome="ok",status_class="4xx",system="pay"} 0
outbound_calls_total{outcome="retry_throttled",status_class="",system="inv"} 0
outbound_calls_total{outcome="retry_throttled",status_class="4xx",system="inv"} 0
outbound_calls_total{outcome="retry_throttled",status_class="5xx",system="inv"} 0
outbound_calls_total{outcome="retry_throttled",status_class="",system="pay"} 0
outbound_calls_total{outcome="retry_throttled",status_class="4xx",system="pay"} 0
outbound_calls_total{outcome="retry_throttled",status_class="5xx",system="pay"} 0
# HELP outbound_attempts_total Outbound attempts by how they ended (outcome: ok, failed, retry, gave_up, breaker_open, forced_open, rate_limited, canceled, hedge_lost; retry: failed, another attempt follows; gave_up: failed, the last) and the class of their status (status_class 2xx..5xx; empty without one). The breaker counts failed, retry, gave_up with a status as failures.
# TYPE outbound_attempts_total counter
outbound_attempts_total{outcome="breaker_open",status_class="",system="inv"} 0
outbound_attempts_total{outcome="breaker_open",status_class="",system="pay"} 0
outbound_attempts_total{outcome="canceled",status_class="",system="inv"} 0
outbound_attempts_total{outcome="canceled",status_class="",system="pay"} 0
outbound_attempts_total{outcome="gave_up",status_class="",system="inv"} 0
outbound_attempts_total{outcome="gave_up",status_class="4xx",system="inv"} 0
outbound_attempts_total{outcome="gave_up",status_class="5xx",system="inv"} 1
outbound_attempts_total{outcome="gave_up",status_class="",system="pay"} 0
outbound_attempts_total{outcome="gave_up",status_class="4xx",system="pay"} 0
outbound_attempts_total{outcome="gave_up",status_class="5xx",system="pay"} 0
outbound_attempts_total{outcome="ok",status_class="2xx",system="inv"} 3
outbound_attempts_total{outcome="ok",status_class="3xx",system="inv"} 0
outbound_attempts_total{outcome="ok",status_class="4xx",system="inv"} 0
outbound_attempts_total{outcome="ok",status_class="2xx",system="pay"} 0
outbound_attempts_total{outcome="ok",status_class="3xx",system="pay"} 0
outbound_attempts_total{outcome="ok",status_class="4xx",system="pay"} 0
outbound_attempts_total{outcome="retry",status_class="",system="inv"} 0
outbound_attempts_total{outcome="retry",status_class="4xx",system="inv"} 0
outbound_attempts_total{outcome="retry",status_class="5xx",system="inv"} 2
outbound_attempts_total{outcome="retry",status_class="",system="pay"} 0
outbound_attempts_total{outcome="retry",status_class="4xx",system="pay"} 0
outbound_attempts_total{outcome="retry",status_class="5xx",system="pay"} 0
# HELP outbound_retries_total Retries sent to the upstream: attempts after the first of their call.
# TYPE outbound_retries_total counter
outbound_retries_total{system="inv"} 2
outbound_retries_total{system="pay"} 0
# HELP outbound_breaker_transitions_total Circuit breaker state changes.
# TYPE outbound_breaker_transitions_total counter
outbound_breaker_transitions_total{from="closed",system="inv",to="open"} 1
outbound_breaker_transitions_total{from="closed",system="pay",to="open"} 0
outbound_breaker_transitions_total{from="half-open",system="inv",to="closed"} 0
outbound_breaker_transitions_total{from="half-open",system="inv",to="open"} 0
outbound_breaker_transitions_total{from="half-open",system="pay",to="closed"} 0
outbound_breaker_transitions_total{from="half-open",system="pay",to="open"} 0
outbound_breaker_transitions_total{from="open",system="inv",to="half-open"} 0
outbound_breaker_transitions_total{from="open",system="pay",to="half-open"} 0
# HELP outbound_breaker_state Circuit breaker state: 0 closed, 1 half-open, 2 open.
# TYPE outbound_breaker_state gauge
outbound_breaker_state{system="inv"} 2
outbound_breaker_state{system="pay"} 0
# HELP outbound_bulkhead_in_flight Calls holding a bulkhead permit (until their body is closed).
# TYPE outbound_bulkhead_in_flight gauge
outbound_bulkhead_in_flight{system="inv"} 0
outbound_bulkhead_in_flight{system="pay"} 0
# HELP outbound_bulkhead_capacity Bulkhead permits: MAX_CONCURRENT.
# TYPE outbound_bulkhead_capacity gauge
outbound_bulkhead_capacity{system="inv"} 1
outbound_bulkhead_capacity{system="pay"} 32
# HELP outbound_bulkhead_rejections_total Calls refused by the bulkhead: full, or no permit within BULKHEAD_MAX_WAIT.
# TYPE outbound_bulkhead_rejections_total counter
outbound_bulkhead_rejections_total{system="inv"} 1
outbound_bulkhead_rejections_total{system="pay"} 0
# HELP outbound_budget_capped_calls_total Calls whose deadline came from the caller's remaining budget rather than CALL_TIMEOUT.
# TYPE outbound_budget_capped_calls_total counter
outbound_budget_capped_calls_total{system="inv"} 1
outbound_budget_capped_calls_total{system="pay"} 0
outbound_attempts_total{outcome="failed",status_class="5xx",system="inv"} 0
outbound_attempts_total{outcome="failed",status_class="5xx",system="pay"} 0
outbound_attempts_total{outcome="forced_open",status_class="",system="inv"} 0
outbound_attempts_total{outcome="forced_open",status_class="",system="pay"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="",system="inv"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="4xx",system="inv"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="5xx",system="inv"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="",system="pay"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="4xx",system="pay"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="5xx",system="pay"} 0
outbound_attempts_total{outcome="rate_limited",status_class="",system="inv"} 0
outbound_attempts_total{outcome="rate_limited",status_class="",system="pay"} 0
outbound_calls_total{outcome="failed",status_class="5xx",system="inv"} 0
outbound_calls_total{outcome="failed",status_class="5xx",system="pay"} 0
outbound_calls_total{outcome="forced_open",status_class="",system="inv"} 0
outbound_calls_total{outcome="forced_open",status_class="",system="pay"} 0
outbound_calls_total{outcome="rate_limited",status_class="",system="inv"} 0
outbound_calls_total{outcome="rate_limited",status_class="",system="pay"} 0
`
	if err := promtest.GatherAndCompare(promReg, strings.NewReader(want),
		"outbound_calls_total", "outbound_attempts_total", "outbound_retries_total",
		"outbound_breaker_transitions_total", "outbound_breaker_state",
		"outbound_bulkhead_in_flight", "outbound_bulkhead_capacity",
		"outbound_bulkhead_rejections_total", "outbound_budget_capped_calls_total",
	); err != nil {
		t.Error(err)
	}

	// Histograms: calls that sent an attempt (ok, flaky, gate, down) and
	// attempts sent to the transport (1 + 2 + 1 + 2).
	for _, h := range []struct {
		name   string
		system string
		count  uint64
	}{
		{"outbound_call_duration_seconds", "inv", 4},
		{"outbound_attempt_duration_seconds", "inv", 6},
		{"outbound_call_duration_seconds", "pay", 0},
		{"outbound_attempt_duration_seconds", "pay", 0},
	} {
		hist := find(t, promReg, h.name, h.system).GetHistogram()
		if hist.GetSampleCount() != h.count {
			t.Errorf("%s{system=%q}: %d samples, want %d", h.name, h.system, hist.GetSampleCount(), h.count)
		}
		if h.count > 0 && (hist.GetSampleSum() <= 0 || hist.GetSampleSum() > 10) {
			t.Errorf("%s{system=%q}: sum %vs, want a few ms", h.name, h.system, hist.GetSampleSum())
		}
		if n := len(hist.GetBucket()); n != len(metrics.DefaultBuckets) {
			t.Errorf("%s: %d buckets, want %d", h.name, n, len(metrics.DefaultBuckets))
		}
	}
	if n, err := promtest.GatherAndCount(promReg); err != nil || n == 0 {
		t.Errorf("gather: %d series, %v", n, err)
	}
}

// TestBreakerTransitions checks the transition counters and the state
// gauge through open, half-open and closed, fed by events.
func TestBreakerTransitions(t *testing.T) {
	m := metrics.New(nil)
	m.ObserveBreaker("inv", observe.BreakerClosed, observe.BreakerOpen)
	m.ObserveBreaker("inv", observe.BreakerOpen, observe.BreakerHalfOpen)
	m.ObserveBreaker("inv", observe.BreakerHalfOpen, observe.BreakerOpen)
	m.ObserveBreaker("inv", observe.BreakerOpen, observe.BreakerHalfOpen)
	m.ObserveBreaker("inv", observe.BreakerHalfOpen, observe.BreakerClosed)
	m.ObserveBreaker("inv", "weird", "odd") // a state gobreaker might add: counted, not lost
	const want = `
# HELP outbound_breaker_transitions_total Circuit breaker state changes.
# TYPE outbound_breaker_transitions_total counter
outbound_breaker_transitions_total{from="closed",system="inv",to="open"} 1
outbound_breaker_transitions_total{from="half-open",system="inv",to="closed"} 1
outbound_breaker_transitions_total{from="half-open",system="inv",to="open"} 1
outbound_breaker_transitions_total{from="open",system="inv",to="half-open"} 2
outbound_breaker_transitions_total{from="weird",system="inv",to="odd"} 1
`
	if err := promtest.CollectAndCompare(m, strings.NewReader(want), "outbound_breaker_transitions_total"); err != nil {
		t.Error(err)
	}
}

// TestUnexpectedOutcome checks that an outcome without a pre-resolved
// series (a call "retry", or one added to registry later) is still
// counted under its name.
func TestUnexpectedOutcome(t *testing.T) {
	m := metrics.New(nil)
	m.ObserveCall(observe.CallEvent{System: "inv", Outcome: observe.OutcomeRetry})
	m.ObserveAttempt(observe.AttemptEvent{System: "inv", Attempt: 1, Outcome: observe.Outcome(200)})
	m.ObserveAttempt(observe.AttemptEvent{System: "inv", Attempt: 1, Outcome: observe.OutcomeRetryThrottled})
	const want = `
# HELP outbound_attempts_total Outbound attempts by how they ended (outcome: ok, failed, retry, gave_up, breaker_open, forced_open, rate_limited, canceled, hedge_lost; retry: failed, another attempt follows; gave_up: failed, the last) and the class of their status (status_class 2xx..5xx; empty without one). The breaker counts failed, retry, gave_up with a status as failures.
# TYPE outbound_attempts_total counter
outbound_attempts_total{outcome="breaker_open",status_class="",system="inv"} 0
outbound_attempts_total{outcome="canceled",status_class="",system="inv"} 0
outbound_attempts_total{outcome="failed",status_class="5xx",system="inv"} 0
outbound_attempts_total{outcome="forced_open",status_class="",system="inv"} 0
outbound_attempts_total{outcome="gave_up",status_class="",system="inv"} 0
outbound_attempts_total{outcome="gave_up",status_class="4xx",system="inv"} 0
outbound_attempts_total{outcome="gave_up",status_class="5xx",system="inv"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="",system="inv"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="4xx",system="inv"} 0
outbound_attempts_total{outcome="hedge_lost",status_class="5xx",system="inv"} 0
outbound_attempts_total{outcome="ok",status_class="2xx",system="inv"} 0
outbound_attempts_total{outcome="ok",status_class="3xx",system="inv"} 0
outbound_attempts_total{outcome="ok",status_class="4xx",system="inv"} 0
outbound_attempts_total{outcome="rate_limited",status_class="",system="inv"} 0
outbound_attempts_total{outcome="retry",status_class="",system="inv"} 0
outbound_attempts_total{outcome="retry",status_class="4xx",system="inv"} 0
outbound_attempts_total{outcome="retry",status_class="5xx",system="inv"} 0
outbound_attempts_total{outcome="retry_throttled",status_class="",system="inv"} 1
outbound_attempts_total{outcome="unknown",status_class="",system="inv"} 1
`
	if err := promtest.CollectAndCompare(m, strings.NewReader(want), "outbound_attempts_total"); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	if got := find(t, reg, "outbound_calls_total", "inv", "outcome", "retry").GetCounter().GetValue(); got != 1 {
		t.Errorf("calls{outcome=retry}: %v, want 1", got)
	}
}

// TestEventsAllocateNothing checks the hot path: once a system's series
// are resolved, an attempt, a call and a transition cost no allocation.
func TestEventsAllocateNothing(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	attempt := observe.AttemptEvent{System: "inv", Method: "GET", Host: "h", Path: "/p", Attempt: 2,
		Status: 503, Duration: 3 * time.Millisecond, Outcome: observe.OutcomeRetry}
	call := observe.CallEvent{System: "inv", Method: "GET", Attempts: 2, Status: 200,
		Duration: 5 * time.Millisecond, Outcome: observe.OutcomeOK}
	m.ObserveCall(call) // resolves "inv"
	allocs := testing.AllocsPerRun(500, func() {
		m.ObserveAttempt(attempt)
		m.ObserveCall(call)
		m.ObserveBreaker("inv", observe.BreakerClosed, observe.BreakerOpen)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per event, want 0", allocs)
	}
}

// TestWatch checks Watch's errors and that watching creates the series.
func TestWatch(t *testing.T) {
	t.Setenv("OUTBOUND_SYSTEMS", "inv")
	t.Setenv("INV_BASE_URL", "http://127.0.0.1:1")
	m := metrics.New(nil)
	if err := m.Watch(nil); err == nil {
		t.Error("Watch(nil): no error")
	}
	r1, err := registry.FromEnvWith(nil, registry.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := registry.FromEnvWith(nil, registry.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if n := promtest.CollectAndCount(m, "outbound_breaker_state"); n != 0 {
		t.Errorf("%d state series before Watch, want 0", n)
	}
	if err := m.Watch(r1); err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(r1); err != nil {
		t.Errorf("watching the same registry twice: %v", err)
	}
	if err := m.Watch(r2); err == nil || !strings.Contains(err.Error(), `"inv"`) {
		t.Errorf("watching a second registry with the same system: %v, want an error naming inv", err)
	}
	if n := promtest.CollectAndCount(m, "outbound_breaker_state"); n != 1 {
		t.Errorf("%d state series after Watch, want 1", n)
	}
	if n, least := promtest.CollectAndCount(m, "outbound_calls_total"), len(observe.CallOutcomes()); n < least {
		t.Errorf("%d call series after Watch, want at least one per call outcome (%d)", n, least)
	}
}

// TestNewPanicsOnConflict checks that New refuses to register twice,
// as prometheus.MustRegister does.
func TestNewPanicsOnConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	defer func() {
		if recover() == nil {
			t.Error("second New on the same registerer did not panic")
		}
	}()
	metrics.New(reg)
}

// TestConcurrentEventsAndScrapes feeds events for new and known systems
// from several goroutines while scraping, for the race detector.
func TestConcurrentEventsAndScrapes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, metrics.WithBuckets(0.001, 0.01, 0.1))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				sys := []string{"a", "b", "c", "d", "e"}[(g+i)%5]
				m.ObserveAttempt(observe.AttemptEvent{System: sys, Attempt: 1 + i%2, Outcome: observe.OutcomeOK, Duration: time.Millisecond})
				m.ObserveCall(observe.CallEvent{System: sys, Attempts: 1, Outcome: observe.OutcomeOK, Duration: time.Millisecond})
			}
		}()
	}
	for range 20 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	var total float64
	for _, sys := range []string{"a", "b", "c", "d", "e"} {
		total += find(t, reg, "outbound_retries_total", sys).GetCounter().GetValue()
		if n := len(find(t, reg, "outbound_call_duration_seconds", sys).GetHistogram().GetBucket()); n != 3 {
			t.Errorf("%d buckets with WithBuckets(3 bounds)", n)
		}
	}
	if total != 400 {
		t.Errorf("retries: %v, want 400 (every other attempt of 800)", total)
	}
}

// degradedCircuit is a fleet's breaker whose Redis is gone.
type degradedCircuit struct{ registry.LocalBreaker }

func (degradedCircuit) LocalChanged(from, to observe.BreakerState)  {}
func (degradedCircuit) Force(observe.BreakerState, time.Time) error { return errors.New("no redis") }
func (degradedCircuit) Forced() (observe.BreakerState, time.Time)   { return "", time.Time{} }
func (degradedCircuit) SetRule(ratio float64, minRequests int)      {}

func (degradedCircuit) FleetSync() observe.FleetSync {
	return observe.FleetSync{Synced: false, Since: time.Now(), LastError: "connection refused"}
}

// TestFleetSynced: a system at BREAKER_SCOPE=fleet has an
// outbound_fleet_synced gauge, from its Status; one at scope local none.
func TestFleetSynced(t *testing.T) {
	loaded, err := config.LoadEnv(map[string]string{
		"OUTBOUND_SYSTEMS": "inv,pay", "INV_BASE_URL": "http://127.0.0.1:1", "PAY_BASE_URL": "http://127.0.0.1:1",
		"PAY_BREAKER_SCOPE": "fleet", "OUTBOUND_FLEET_REDIS_URL": "redis://127.0.0.1:1", "OUTBOUND_FLEET_NAMESPACE": "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(nil)
	r, err := registry.New(loaded, registry.WithObserver(m), registry.WithFleet(degradedFleet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := m.Watch(r); err != nil {
		t.Fatal(err)
	}
	want := "# HELP outbound_fleet_synced 1 while a breaker at BREAKER_SCOPE=fleet shares evidence and state with the fleet over Redis, 0 while it decides alone (Redis failing, slow or emptied). Absent at scope local.\n" +
		"# TYPE outbound_fleet_synced gauge\noutbound_fleet_synced{system=\"pay\"} 0\n"
	if err := promtest.CollectAndCompare(m, strings.NewReader(want), "outbound_fleet_synced"); err != nil {
		t.Error(err)
	}
}

// degradedFleet gives every system at BREAKER_SCOPE=fleet a degraded
// shared breaker, and no quota.
type degradedFleet struct {
	registry.Fleet // asked for nothing: a registry asks a BreakerFleet for SharedBreakers
}

func (degradedFleet) SharedBreaker(_ registry.FleetSystem, local registry.LocalBreaker) (registry.SharedBreaker, error) {
	return degradedCircuit{local}, nil
}

func gaugeValue(t *testing.T, g prometheus.Gatherer, name, system string) float64 {
	t.Helper()
	return find(t, g, name, system).GetGauge().GetValue()
}

// TestRateLimitAndForcedBreakerAreGauges checks the gauges of what a rate
// limit and an operator impose on a system.
func TestRateLimitAndForcedBreakerAreGauges(t *testing.T) {
	up, _ := upstream(t)
	m := metrics.New(nil)
	r := registrytest.New(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": up.URL,
		"INV_RATE_LIMIT": "1/h", "INV_RATE_BURST": "1"}, registrytest.With(registry.WithObserver(m)))
	if err := m.Watch(r); err != nil {
		t.Fatal(err)
	}
	inv := r.MustClient("inv")
	for range 2 {
		_, _ = get(context.Background(), inv, "/")
	}
	if err := inv.Force(observe.BreakerOpen, time.Minute); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	if got := find(t, reg, "outbound_rate_limit_refused_total", "inv").GetCounter().GetValue(); got != 1 {
		t.Errorf("rate refused %v, want 1", got)
	}
	if got := gaugeValue(t, reg, "outbound_rate_limit_share", "inv"); got != 1.0/3600 {
		t.Errorf("share %v, want 1/3600 per second", got)
	}
	if got := gaugeValue(t, reg, "outbound_breaker_forced", "inv"); got != 1 {
		t.Errorf("forced %v, want 1", got)
	}
}
