package otel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"

	"github.com/outbound-go/outbound/observe"
)

// callBuckets are the bounds, in seconds, of outbound.call.duration: the
// semantic conventions' advice for HTTP durations (5ms to 10s), extended
// to the 60s READ_TIMEOUT ceiling, since a call's retries and backoff can
// take far longer than one request.
var callBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 15, 30, 60}

// instruments are the metrics of outbound's clients.
type instruments struct {
	// The HTTP client semantic conventions: one record per request
	// sent (each attempt), and the requests in flight.
	request httpconv.ClientRequestDuration
	active  httpconv.ClientActiveRequests

	// outbound's own, recorded from events.
	calls       metric.Int64Counter     // outbound.calls
	callDur     metric.Float64Histogram // outbound.call.duration
	transitions metric.Int64Counter     // outbound.breaker.transitions
	adjustments metric.Int64Counter     // outbound.bulkhead.adjustments
	injected    metric.Int64Counter     // outbound.injected.attempts

	// outbound's own, read from Status at collection time.
	breaker    metric.Int64ObservableGauge         // outbound.breaker.state
	inFlight   metric.Int64ObservableUpDownCounter // outbound.bulkhead.in_flight
	limit      metric.Int64ObservableUpDownCounter // outbound.bulkhead.limit
	capacity   metric.Int64ObservableUpDownCounter // outbound.bulkhead.capacity
	retries    metric.Int64ObservableCounter       // outbound.retries
	hedgesSent metric.Int64ObservableCounter       // outbound.hedges.sent
	hedgesWon  metric.Int64ObservableCounter       // outbound.hedges.won
	synced     metric.Int64ObservableGauge         // outbound.fleet.synced
	forced     metric.Int64ObservableGauge         // outbound.breaker.forced
	rateShare  metric.Float64ObservableGauge       // outbound.rate.share
	rateTokens metric.Float64ObservableGauge       // outbound.rate.tokens
	ratePaused metric.Int64ObservableGauge         // outbound.rate.paused
	rateRefuse metric.Int64ObservableCounter       // outbound.rate.refused
}

// newInstruments creates every instrument with meter, or returns every
// error the meter gave.
func newInstruments(meter metric.Meter) (instruments, error) {
	var m instruments
	errs := make([]error, 0, 4)
	add := func(err error) { errs = append(errs, err) }
	var err error
	m.request, err = httpconv.NewClientRequestDuration(meter)
	add(err)
	m.active, err = httpconv.NewClientActiveRequests(meter)
	add(err)
	m.calls, err = meter.Int64Counter("outbound.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls through outbound's clients, by how they ended (outbound.outcome): refusals (breaker_open, bulkhead_full, ...) included."))
	add(err)
	m.callDur, err = meter.Float64Histogram("outbound.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of calls that sent at least one attempt, from entry to the response headers or the error, retries and backoff included."),
		metric.WithExplicitBucketBoundaries(callBuckets...))
	add(err)
	m.transitions, err = meter.Int64Counter("outbound.breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit breaker state changes, by outbound.breaker.from and outbound.breaker.to."))
	add(err)
	m.adjustments, err = meter.Int64Counter("outbound.bulkhead.adjustments", metric.WithUnit("{adjustment}"),
		metric.WithDescription("Moves of an adaptive bulkhead limit (ADAPTIVE_CONCURRENCY) by a quarter or more, by outbound.bulkhead.direction."))
	add(err)
	m.injected, err = meter.Int64Counter("outbound.injected.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Drills (OUTBOUND_FAULTS=on): attempts fault injection aborted or delayed, by outcome; not in http.client.request.duration."))
	add(err)
	add(m.observableInstruments(meter))
	return m, errors.Join(errs...)
}

func (m *instruments) observableInstruments(meter metric.Meter) error {
	var errs [13]error
	m.breaker, errs[0] = meter.Int64ObservableGauge("outbound.breaker.state", metric.WithUnit("1"),
		metric.WithDescription("1 for the circuit breaker's current state (outbound.breaker.state), 0 for the others."))
	m.inFlight, errs[1] = meter.Int64ObservableUpDownCounter("outbound.bulkhead.in_flight", metric.WithUnit("{call}"),
		metric.WithDescription("Calls holding a bulkhead permit (until their body is closed)."))
	m.limit, errs[2] = meter.Int64ObservableUpDownCounter("outbound.bulkhead.limit", metric.WithUnit("{call}"),
		metric.WithDescription("Calls the bulkhead admits at once now: the adaptive limit (ADAPTIVE_CONCURRENCY), else MAX_CONCURRENT."))
	m.capacity, errs[3] = meter.Int64ObservableUpDownCounter("outbound.bulkhead.capacity", metric.WithUnit("{call}"),
		metric.WithDescription("Bulkhead permits: MAX_CONCURRENT."))
	m.retries, errs[4] = meter.Int64ObservableCounter("outbound.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries sent: attempts after the first of their call."))
	m.hedgesSent, errs[5] = meter.Int64ObservableCounter("outbound.hedges.sent", metric.WithUnit("{hedge}"),
		metric.WithDescription("Extra copies of attempts sent by hedging (HEDGE_DELAY)."))
	m.hedgesWon, errs[6] = meter.Int64ObservableCounter("outbound.hedges.won", metric.WithUnit("{hedge}"),
		metric.WithDescription("Hedges whose answer the caller got."))
	m.synced, errs[7] = meter.Int64ObservableGauge("outbound.fleet.synced", metric.WithUnit("1"),
		metric.WithDescription("1 while a breaker at BREAKER_SCOPE=fleet shares evidence and state with the fleet, 0 while it decides alone; absent at scope local."))
	m.forced, errs[8] = meter.Int64ObservableGauge("outbound.breaker.forced", metric.WithUnit("1"),
		metric.WithDescription("1 while an operator forces the breaker (outbound.breaker.state open or closed) on this pod; absent otherwise."))
	m.rateShare, errs[9] = meter.Float64ObservableGauge("outbound.rate.share", metric.WithUnit("{request}/s"),
		metric.WithDescription("Requests per second this pod may send under RATE_LIMIT: all of it at scope local, its share of the fleet's at fleet; absent without a limit."))
	m.rateTokens, errs[10] = meter.Float64ObservableGauge("outbound.rate.tokens", metric.WithUnit("{request}"),
		metric.WithDescription("Requests this pod may send at once now under RATE_LIMIT."))
	m.ratePaused, errs[11] = meter.Int64ObservableGauge("outbound.rate.paused", metric.WithUnit("1"),
		metric.WithDescription("1 while the upstream has paused the system (429 or 503 with Retry-After, or its rate-limit headers)."))
	m.rateRefuse, errs[12] = meter.Int64ObservableCounter("outbound.rate.refused", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the rate limit refused, retries and hedges included."))
	return errors.Join(errs[:]...)
}

func (m *instruments) observables() []metric.Observable {
	return []metric.Observable{m.breaker, m.inFlight, m.limit, m.capacity, m.retries, m.hedgesSent, m.hedgesWon, m.synced,
		m.forced, m.rateShare, m.rateTokens, m.ratePaused, m.rateRefuse}
}

// breakerStates are the values of outbound.breaker.state, each reported
// for every system so that a state's series exists at 0.
var breakerStates = [...]observe.BreakerState{observe.BreakerClosed, observe.BreakerHalfOpen, observe.BreakerOpen}

// observeStatus reports one client's Status.
func (m *instruments) observeStatus(o metric.Observer, s *system, st *observe.Status) {
	for k, state := range breakerStates {
		o.ObserveInt64(m.breaker, b2i(st.Breaker == state), s.breaker[k].obs...)
	}
	base := s.base.obs
	o.ObserveInt64(m.inFlight, st.InFlight, base...)
	o.ObserveInt64(m.limit, st.Limit, base...)
	o.ObserveInt64(m.capacity, st.Capacity, base...)
	o.ObserveInt64(m.retries, int64(st.Retries), base...)
	o.ObserveInt64(m.hedgesSent, int64(st.HedgesSent), base...)
	o.ObserveInt64(m.hedgesWon, int64(st.HedgesWon), base...)
	for _, r := range st.Routes {
		if !r.OwnBreaker {
			continue
		}
		for _, state := range breakerStates {
			o.ObserveInt64(m.breaker, b2i(r.Breaker == state), metric.WithAttributes(s.attr, RouteKey.String(r.Name),
				BreakerStateKey.String(string(state))))
		}
	}
	if st.Fleet != nil {
		o.ObserveInt64(m.synced, b2i(st.Fleet.Synced), base...)
	}
	if f := st.Forced; f != nil {
		for k, state := range breakerStates {
			if state == f.State {
				o.ObserveInt64(m.forced, 1, s.breaker[k].obs...)
			}
		}
	}
	if r := st.Rate; r != nil {
		o.ObserveFloat64(m.rateShare, r.Share, base...)
		o.ObserveFloat64(m.rateTokens, r.Tokens, base...)
		o.ObserveInt64(m.ratePaused, b2i(!r.PausedUntil.IsZero()), base...)
		o.ObserveInt64(m.rateRefuse, int64(r.Refused), base...)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ObserveAttempt implements [observe.Observer]: an attempt sent to the
// upstream is one record of http.client.request.duration. An attempt
// refused on its way (breaker, rate limit) sent nothing and is not
// recorded; one that fault injection aborted or delayed counts in
// outbound.injected.attempts instead, since its figures are not the
// upstream's.
func (i *Instrumentation) ObserveAttempt(e observe.AttemptEvent) {
	if e.Outcome.Refused() || int(e.Outcome) >= observe.NumOutcomes {
		return
	}
	ctx := context.Background()
	s := i.system(e.System)
	if e.Injected {
		i.m.injected.Add(ctx, 1, s.outcome[e.Outcome].add...)
		return
	}
	if h := i.m.request.Inst(); h.Enabled(ctx) {
		h.Record(ctx, e.Duration.Seconds(), s.requestAttrs(&e).rec...)
	}
}

// ObserveCall implements [observe.Observer]: every call counts in
// outbound.calls by its outcome (and its declared route), and one that
// sent an attempt is a record of outbound.call.duration.
func (i *Instrumentation) ObserveCall(e observe.CallEvent) {
	if int(e.Outcome) >= observe.NumOutcomes {
		return
	}
	ctx := context.Background()
	set := i.system(e.System).callSet(e.RouteName, e.Outcome)
	i.m.calls.Add(ctx, 1, set.add...)
	if e.Attempts > 0 {
		i.m.callDur.Record(ctx, e.Duration.Seconds(), set.rec...)
	}
}

// ObserveBreaker implements [observe.Observer]: one transition counted.
func (i *Instrumentation) ObserveBreaker(system string, from, to observe.BreakerState) {
	i.m.transitions.Add(context.Background(), 1, metric.WithAttributes(
		SystemKey.String(system), BreakerFromKey.String(string(from)), BreakerToKey.String(string(to))))
}

// ObserveRouteBreaker implements [observe.RouteBreakerObserver]: one
// transition of a route's own breaker (<P>_ROUTE_<R>_BREAKER=own)
// counted, with outbound.route.
func (i *Instrumentation) ObserveRouteBreaker(system, route string, from, to observe.BreakerState) {
	i.m.transitions.Add(context.Background(), 1, metric.WithAttributes(
		SystemKey.String(system), RouteKey.String(route), BreakerFromKey.String(string(from)), BreakerToKey.String(string(to))))
}

// ObserveLimit implements [observe.LimitObserver]: one large move of an
// adaptive limit counted, by direction.
func (i *Instrumentation) ObserveLimit(e observe.LimitEvent) {
	dir := "up"
	if e.To < e.From {
		dir = "down"
	}
	i.m.adjustments.Add(context.Background(), 1, metric.WithAttributes(SystemKey.String(e.System), DirectionKey.String(dir)))
}
