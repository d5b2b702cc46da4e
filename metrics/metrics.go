package metrics

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultBuckets are the bounds, in seconds, of the duration histograms:
// Prometheus's defaults (5ms to 10s) extended to the 60s READ_TIMEOUT
// ceiling, so a call that runs into CALL_TIMEOUT lands in a bucket of
// its own rather than in +Inf.
var DefaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60}

// transition is a breaker state change.
type transition struct{ from, to observe.BreakerState }

// transitions are the state changes a breaker makes; their series exist
// at zero from the start.
var transitions = []transition{
	{observe.BreakerClosed, observe.BreakerOpen},
	{observe.BreakerOpen, observe.BreakerHalfOpen},
	{observe.BreakerHalfOpen, observe.BreakerClosed},
	{observe.BreakerHalfOpen, observe.BreakerOpen},
}

// Metrics is a [observe.Observer] that counts every call, attempt,
// retry and breaker transition, and a prometheus.Collector that also
// reads each watched registry's Status at scrape time for the breaker
// and bulkhead gauges. Create it with [New]; it is safe for concurrent
// use.
type Metrics struct {
	calls       *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	retries     *prometheus.CounterVec
	callDur     *prometheus.HistogramVec
	attemptDur  *prometheus.HistogramVec
	transitions *prometheus.CounterVec
	injected    *prometheus.CounterVec // drills: attempts fault injection aborted or delayed

	breakerState *prometheus.Desc
	inFlight     *prometheus.Desc
	capacity     *prometheus.Desc
	limit        *prometheus.Desc
	bhRejections *prometheus.Desc
	budgetCapped *prometheus.Desc
	fleetSynced  *prometheus.Desc
	hedgesSent   *prometheus.Desc
	hedgesWon    *prometheus.Desc
	forced       *prometheus.Desc
	rateShare    *prometheus.Desc
	rateTokens   *prometheus.Desc
	ratePaused   *prometheus.Desc
	rateRefused  *prometheus.Desc
	// routeCalls and routeBreaker are the series of the systems' routes
	// (<P>_ROUTES): a label only what is declared sets.
	routeCalls   *prometheus.CounterVec
	routeBreaker *prometheus.Desc
	// configInfo, configApplied and configRefused are the state of a
	// registry's settings file (OUTBOUND_CONFIG_FILE).
	configInfo, configApplied, configRefused *prometheus.Desc

	// systems maps a system's name to its resolved series. It is copied
	// on write under mu, so the event path reads it without a lock; the
	// set of systems is fixed once the registries are built, so writes
	// happen a few times at start.
	systems atomic.Pointer[map[string]*series]

	mu      sync.Mutex // guards writes of systems, and watched
	watched []*registry.Registry
}

// series holds the label children of one system, resolved once.
type series struct {
	system      string
	calls       outcomeCounters
	attempts    outcomeCounters
	retries     prometheus.Counter
	callDur     prometheus.Observer
	attemptDur  prometheus.Observer
	transitions map[transition]prometheus.Counter
}

// Option configures [New].
type Option func(*options)

type options struct{ buckets []float64 }

// WithBuckets sets the bounds, in seconds, of both duration histograms
// (default [DefaultBuckets]).
func WithBuckets(bounds ...float64) Option {
	return func(o *options) { o.buckets = slices.Clone(bounds) }
}

// New returns the metrics of outbound's clients, registered with reg.
// Pass it to registry.WithObserver, then give the built registry to
// [Metrics.Watch] for the gauges. New panics if reg refuses the metrics
// (names already registered), as prometheus.MustRegister does; pass a
// nil reg to register the returned Collector yourself.
func New(reg prometheus.Registerer, opts ...Option) *Metrics {
	o := options{buckets: DefaultBuckets}
	for _, opt := range opts {
		opt(&o)
	}
	system := []string{"system"}
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_calls_total",
			Help: "Outbound calls by how they ended (outcome: " + outcomeList(observe.CallOutcomes()) + "; the refusals sent nothing) and the class of the status the caller got (status_class 2xx..5xx; empty without one). failed is an answer the breaker counts as the upstream's failure (a 501).",
		}, []string{"system", "outcome", "status_class"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_attempts_total",
			Help: "Outbound attempts by how they ended (outcome: " + outcomeList(observe.AttemptOutcomes()) + "; retry: failed, another attempt follows; gave_up: failed, the last) and the class of their status (status_class 2xx..5xx; empty without one). The breaker counts failed, retry, gave_up with a status as failures.",
		}, []string{"system", "outcome", "status_class"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_retries_total",
			Help: "Retries sent to the upstream: attempts after the first of their call.",
		}, system),
		callDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "outbound_call_duration_seconds",
			Help:    "Duration of outbound calls that sent at least one attempt, from entry to the response headers or the error, retries and backoff included.",
			Buckets: o.buckets,
		}, system),
		attemptDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "outbound_attempt_duration_seconds",
			Help:    "Duration of outbound attempts sent to the transport, to the response headers or the error.",
			Buckets: o.buckets,
		}, system),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_breaker_transitions_total",
			Help: "Circuit breaker state changes.",
		}, []string{"system", "from", "to"}),
		injected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "outbound_injected_attempts_total",
			Help:        "Drills (OUTBOUND_FAULTS=on): attempts fault injection aborted or delayed, by outcome. They are counted here only, not in outbound_attempts_total, outbound_retries_total nor the attempt duration histogram.",
			ConstLabels: prometheus.Labels{"injected": "true"},
		}, []string{"system", "outcome"}),
		routeCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_route_calls_total",
			Help: "Outbound calls of a system's declared routes (<P>_ROUTES), by route and how they ended (outcome, as outbound_calls_total, which counts them too). A call that matches no route is not here.",
		}, []string{"system", "route", "outcome"}),
	}
	m.newStatusDescs()
	empty := map[string]*series{}
	m.systems.Store(&empty)
	if reg != nil {
		reg.MustRegister(m)
	}
	return m
}

// Watch adds the registry whose Status the gauges read at scrape time,
// and creates every series of its systems at zero. Call it once the
// registry is built; several registries may be watched if their system
// names differ. The registry is read, never closed.
func (m *Metrics) Watch(r *registry.Registry) error {
	if r == nil {
		return errors.New("metrics: Watch of a nil registry")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	names := r.Names()
	for _, w := range m.watched {
		if w == r {
			return nil
		}
		for _, n := range w.Names() {
			if slices.Contains(names, n) {
				return fmt.Errorf("metrics: system %q is already watched in another registry", n)
			}
		}
	}
	for _, n := range names {
		m.resolveLocked(n)
	}
	m.watched = append(m.watched, r)
	return nil
}

// ObserveAttempt implements observe.Observer.
func (m *Metrics) ObserveAttempt(e observe.AttemptEvent) {
	if e.Injected {
		// A drill's made-up failure or delay: counted apart, so it is
		// not read as the upstream's.
		m.injected.WithLabelValues(e.System, e.Outcome.String()).Inc()
		return
	}
	s := m.series(e.System)
	s.attempts.inc(e.Outcome, e.Status)
	if e.Outcome.Refused() {
		return // refused: no I/O, no duration, not a retry sent
	}
	s.attemptDur.Observe(e.Duration.Seconds())
	if e.Attempt > 1 && e.Hedge == 0 {
		s.retries.Inc() // a hedge is not a retry
	}
}

// ObserveCall implements observe.Observer.
func (m *Metrics) ObserveCall(e observe.CallEvent) {
	s := m.series(e.System)
	s.calls.inc(e.Outcome, e.Status)
	if e.RouteName != "" {
		m.routeCalls.WithLabelValues(e.System, e.RouteName, e.Outcome.String()).Inc()
	}
	if e.Attempts > 0 {
		s.callDur.Observe(e.Duration.Seconds())
	}
}

// ObserveBreaker implements observe.Observer.
func (m *Metrics) ObserveBreaker(system string, from, to observe.BreakerState) {
	s := m.series(system)
	if c, ok := s.transitions[transition{from, to}]; ok {
		c.Inc()
		return
	}
	m.transitions.WithLabelValues(system, string(from), string(to)).Inc()
}

// outcomeCounters are a system's children of a counter by outcome and
// status class: resolved at start for the usual pairs (startClasses),
// nil for the others.
type outcomeCounters struct {
	vec      *prometheus.CounterVec
	system   string
	children [observe.NumOutcomes][numClasses]prometheus.Counter
}

// inc counts outcome o with status in the resolved child, or through the
// vector for a pair that has none (resolved on its first use).
func (c *outcomeCounters) inc(o observe.Outcome, status int) {
	k := classIndex(status)
	if int(o) < len(c.children) && c.children[o][k] != nil {
		c.children[o][k].Inc()
		return
	}
	c.vec.WithLabelValues(c.system, o.String(), observe.StatusClass(status)).Inc()
}

// numClasses is the number of values of status_class: none, 1xx..5xx.
const numClasses = 6

// classIndex is the index of status's class: 0 for none, 1..5 for 1xx..5xx.
func classIndex(status int) int {
	if status < 100 || status > 599 {
		return 0
	}
	return status / 100
}

// startClasses are the status classes whose series of outcome o exist at
// zero from the start: those an outcome commonly has (a refusal has no
// status; an answer the breaker counts a success is 2xx-4xx; a failure
// is 4xx (408, 429) or 5xx, or has no status).
func startClasses(o observe.Outcome) []int {
	switch {
	case o.Refused() || o == observe.OutcomeCanceled:
		return []int{0}
	case o == observe.OutcomeOK:
		return []int{2, 3, 4}
	case o == observe.OutcomeFailed:
		return []int{5}
	}
	return []int{0, 4, 5}
}

// outcomeList names the outcomes, for a metric's help.
func outcomeList(outs []observe.Outcome) string {
	names := make([]string, len(outs))
	for i, o := range outs {
		names[i] = o.String()
	}
	return strings.Join(names, ", ")
}

// series returns the resolved children of system, resolving them on the
// first event of a system that is not watched.
func (m *Metrics) series(system string) *series {
	if s, ok := (*m.systems.Load())[system]; ok {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.resolveLocked(system)
}

func (m *Metrics) resolveLocked(system string) *series {
	cur := *m.systems.Load()
	if s, ok := cur[system]; ok {
		return s
	}
	s := &series{
		system:      system,
		retries:     m.retries.WithLabelValues(system),
		callDur:     m.callDur.WithLabelValues(system),
		attemptDur:  m.attemptDur.WithLabelValues(system),
		transitions: make(map[transition]prometheus.Counter, len(transitions)),
	}
	s.calls = outcomeCounters{vec: m.calls, system: system}
	for _, o := range observe.CallOutcomes() {
		for _, k := range startClasses(o) {
			s.calls.children[o][k] = m.calls.WithLabelValues(system, o.String(), classLabel(k))
		}
	}
	s.attempts = outcomeCounters{vec: m.attempts, system: system}
	for _, o := range observe.AttemptOutcomes() {
		for _, k := range startClasses(o) {
			s.attempts.children[o][k] = m.attempts.WithLabelValues(system, o.String(), classLabel(k))
		}
	}
	for _, t := range transitions {
		s.transitions[t] = m.transitions.WithLabelValues(system, string(t.from), string(t.to))
	}
	next := make(map[string]*series, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[system] = s
	m.systems.Store(&next)
	return s
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.attempts.Describe(ch)
	m.retries.Describe(ch)
	m.callDur.Describe(ch)
	m.attemptDur.Describe(ch)
	m.transitions.Describe(ch)
	m.injected.Describe(ch)
	m.routeCalls.Describe(ch)
	ch <- m.routeBreaker
	ch <- m.configInfo
	ch <- m.configApplied
	ch <- m.configRefused
	ch <- m.breakerState
	ch <- m.inFlight
	ch <- m.capacity
	ch <- m.limit
	ch <- m.bhRejections
	ch <- m.budgetCapped
	ch <- m.fleetSynced
	ch <- m.hedgesSent
	ch <- m.hedgesWon
	ch <- m.forced
	ch <- m.rateShare
	ch <- m.rateTokens
	ch <- m.ratePaused
	ch <- m.rateRefused
}

// Collect implements prometheus.Collector. The gauges come from each
// watched registry's Status, read now; no lock of this package is held
// meanwhile, since reading a breaker's state may move it from open to
// half-open and so call back into ObserveBreaker.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	watched := slices.Clone(m.watched)
	m.mu.Unlock()
	for _, r := range watched {
		if s := r.Settings(); s.File != "" {
			refused := "0"
			if s.Refused != nil {
				refused = "1"
			}
			ch <- prometheus.MustNewConstMetric(m.configInfo, prometheus.GaugeValue, 1, s.Version, refused)
			ch <- prometheus.MustNewConstMetric(m.configApplied, prometheus.CounterValue, float64(s.Applied))
			ch <- prometheus.MustNewConstMetric(m.configRefused, prometheus.CounterValue, float64(s.Refusals))
		}
		for _, st := range r.Status() {
			ch <- prometheus.MustNewConstMetric(m.breakerState, prometheus.GaugeValue, breakerValue(st.Breaker), st.System)
			for _, rt := range st.Routes {
				if rt.OwnBreaker {
					ch <- prometheus.MustNewConstMetric(m.routeBreaker, prometheus.GaugeValue, breakerValue(rt.Breaker), st.System, rt.Name)
				}
			}
			ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(st.InFlight), st.System)
			ch <- prometheus.MustNewConstMetric(m.capacity, prometheus.GaugeValue, float64(st.Capacity), st.System)
			ch <- prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, float64(st.Limit), st.System)
			ch <- prometheus.MustNewConstMetric(m.bhRejections, prometheus.CounterValue, float64(st.BulkheadRefused), st.System)
			ch <- prometheus.MustNewConstMetric(m.budgetCapped, prometheus.CounterValue, float64(st.BudgetCapped), st.System)
			if st.Fleet != nil {
				synced := 0.0
				if st.Fleet.Synced {
					synced = 1
				}
				ch <- prometheus.MustNewConstMetric(m.fleetSynced, prometheus.GaugeValue, synced, st.System)
			}
			ch <- prometheus.MustNewConstMetric(m.hedgesSent, prometheus.CounterValue, float64(st.HedgesSent), st.System)
			ch <- prometheus.MustNewConstMetric(m.hedgesWon, prometheus.CounterValue, float64(st.HedgesWon), st.System)
			m.collectControls(ch, st)
		}
	}
	// After Status, so a transition it caused is in this scrape.
	m.calls.Collect(ch)
	m.attempts.Collect(ch)
	m.retries.Collect(ch)
	m.callDur.Collect(ch)
	m.attemptDur.Collect(ch)
	m.transitions.Collect(ch)
	m.injected.Collect(ch)
	m.routeCalls.Collect(ch)
}

// breakerValue is the gauge value of a breaker state.
func breakerValue(s observe.BreakerState) float64 {
	switch s {
	case observe.BreakerHalfOpen:
		return 1
	case observe.BreakerOpen:
		return 2
	}
	return 0
}

var _ observe.Observer = (*Metrics)(nil)
var _ prometheus.Collector = (*Metrics)(nil)

// classLabel is the status_class of index k.
func classLabel(k int) string { return observe.StatusClass(k * 100) }

// collectControls sends what an operator and a rate limit impose on a
// system: the breaker forced, the share, the tokens, the pause.
func (m *Metrics) collectControls(ch chan<- prometheus.Metric, st observe.Status) {
	if f := st.Forced; f != nil {
		ch <- prometheus.MustNewConstMetric(m.forced, prometheus.GaugeValue, 1, st.System, string(f.State))
	}
	r := st.Rate
	if r == nil {
		return
	}
	paused := 0.0
	if !r.PausedUntil.IsZero() {
		paused = 1
	}
	ch <- prometheus.MustNewConstMetric(m.rateShare, prometheus.GaugeValue, r.Share, st.System)
	ch <- prometheus.MustNewConstMetric(m.rateTokens, prometheus.GaugeValue, r.Tokens, st.System)
	ch <- prometheus.MustNewConstMetric(m.ratePaused, prometheus.GaugeValue, paused, st.System)
	ch <- prometheus.MustNewConstMetric(m.rateRefused, prometheus.CounterValue, float64(r.Refused), st.System)
}

// newStatusDescs describes the gauges and counters read from Status at
// scrape time.
func (m *Metrics) newStatusDescs() {
	system := []string{"system"}
	m.breakerState = prometheus.NewDesc("outbound_breaker_state",
		"Circuit breaker state: 0 closed, 1 half-open, 2 open.", system, nil)
	m.inFlight = prometheus.NewDesc("outbound_bulkhead_in_flight",
		"Calls holding a bulkhead permit (until their body is closed).", system, nil)
	m.capacity = prometheus.NewDesc("outbound_bulkhead_capacity",
		"Bulkhead permits: MAX_CONCURRENT.", system, nil)
	m.limit = prometheus.NewDesc("outbound_bulkhead_limit",
		"Calls the bulkhead admits at once now: the adaptive limit (ADAPTIVE_CONCURRENCY), else MAX_CONCURRENT.", system, nil)
	m.bhRejections = prometheus.NewDesc("outbound_bulkhead_rejections_total",
		"Calls refused by the bulkhead: full, or no permit within BULKHEAD_MAX_WAIT.", system, nil)
	m.budgetCapped = prometheus.NewDesc("outbound_budget_capped_calls_total",
		"Calls whose deadline came from the caller's remaining budget rather than CALL_TIMEOUT.", system, nil)
	m.fleetSynced = prometheus.NewDesc("outbound_fleet_synced",
		"1 while a breaker at BREAKER_SCOPE=fleet shares evidence and state with the fleet over Redis, 0 while it decides alone (Redis failing, slow or emptied). Absent at scope local.", system, nil)
	m.hedgesSent = prometheus.NewDesc("outbound_hedges_sent_total",
		"Extra copies of attempts sent by hedging (HEDGE_DELAY).", system, nil)
	m.hedgesWon = prometheus.NewDesc("outbound_hedges_won_total",
		"Hedges whose answer the caller got.", system, nil)
	m.forced = prometheus.NewDesc("outbound_breaker_forced",
		"1 while an operator forces the breaker (state open or closed) on this pod, until the override ends or is released. Absent otherwise.", []string{"system", "state"}, nil)
	m.rateShare = prometheus.NewDesc("outbound_rate_limit_share",
		"Requests per second this pod may send under RATE_LIMIT: all of it at RATE_SCOPE=local, its share of the fleet's at fleet. Absent without a limit.", system, nil)
	m.rateTokens = prometheus.NewDesc("outbound_rate_limit_tokens",
		"Requests this pod may send at once now under RATE_LIMIT.", system, nil)
	m.ratePaused = prometheus.NewDesc("outbound_rate_limit_paused",
		"1 while the upstream has paused the system (429 or 503 with Retry-After, or its rate-limit headers), 0 otherwise.", system, nil)
	m.configInfo = prometheus.NewDesc("outbound_config_info",
		"1, labelled with the version of the settings file (OUTBOUND_CONFIG_FILE) this pod runs (a hash of its content: pods that run the same file show the same) and refused=1 while its last change was refused. Absent without a settings file.", []string{"version", "refused"}, nil)
	m.configApplied = prometheus.NewDesc("outbound_config_changes_applied_total",
		"Changes of the settings file applied since start.", nil, nil)
	m.configRefused = prometheus.NewDesc("outbound_config_changes_refused_total",
		"Changes of the settings file refused whole since start (the report is logged and in the status page).", nil, nil)
	m.routeBreaker = prometheus.NewDesc("outbound_route_breaker_state",
		"State of a route's own breaker (<P>_ROUTE_<R>_BREAKER=own): 0 closed, 1 half-open, 2 open. Absent for a route that shares its system's.", []string{"system", "route"}, nil)
	m.rateRefused = prometheus.NewDesc("outbound_rate_limit_refused_total",
		"Requests the rate limit refused (ErrRateLimited), retries and hedges included.", system, nil)
}
