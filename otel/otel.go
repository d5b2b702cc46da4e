package otel

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// ScopeName is the instrumentation scope of every meter and tracer this
// package creates: the name exporters show as the source of its metrics
// and spans.
const ScopeName = "github.com/outbound-go/outbound/otel"

// Instrumentation is an [observe.Observer] that turns a registry's
// events into OpenTelemetry metrics and its calls into spans. It is also
// an [observe.Tracer], an [observe.StatusWatcher] and an
// [observe.LimitObserver]; install it with [Instrumentation.Option] (or
// registry.WithObserver). Create it with [New]; it is safe for concurrent
// use, and one Instrumentation may serve several registries whose system
// names differ.
type Instrumentation struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	m      instruments
	reg    metric.Registration // the callback of the instruments read from Status

	// systems maps a system's name to its resolved attribute sets. It
	// is copied on write under mu, so the event path reads it without a
	// lock; the set of systems is fixed once the registries are built.
	systems atomic.Pointer[map[string]*system]

	mu     sync.Mutex                // guards writes of systems, and status
	status []func() []observe.Status // one per registry watched
}

// Option configures [New].
type Option interface {
	apply(*options)
}

type options struct {
	mp   metric.MeterProvider
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithMeterProvider sets the provider of the meter that records the
// metrics. The default is the global one (otel.GetMeterProvider), which
// records nothing until the service sets one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.mp = mp })
}

// WithTracerProvider sets the provider of the tracer that starts the
// spans. The default is the global one (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tp = tp })
}

// WithPropagators sets the propagators that write the trace context into
// each attempt's request headers (W3C traceparent, baggage, ...). The
// default is the global one (otel.GetTextMapPropagator), which writes
// nothing until the service sets one.
func WithPropagators(p propagation.TextMapPropagator) Option {
	return optionFunc(func(o *options) { o.prop = p })
}

// New returns the instrumentation of outbound's clients: it creates the
// instruments with the meter provider's meter and registers the callback
// that reads the clients' Status at collection time. It fails only when
// the meter refuses an instrument or the callback; nothing is left
// registered then.
func New(opts ...Option) (*Instrumentation, error) {
	o := options{}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	if o.prop == nil {
		o.prop = otel.GetTextMapPropagator()
	}
	i := &Instrumentation{
		tracer: o.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		prop:   o.prop,
	}
	empty := map[string]*system{}
	i.systems.Store(&empty)
	meter := o.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var err error
	if i.m, err = newInstruments(meter); err != nil {
		return nil, err
	}
	if i.reg, err = meter.RegisterCallback(i.collect, i.m.observables()...); err != nil {
		return nil, errors.Join(errors.New("otel: registering the Status callback"), err)
	}
	return i, nil
}

// Option returns the registry option that installs i:
// registry.WithObserver(i).
func (i *Instrumentation) Option() registry.Option { return registry.WithObserver(i) }

// Close unregisters the callback that reads the registries' Status, so
// that the meter provider stops reporting the instruments it feeds
// (breaker state, bulkhead, retries, hedges, fleet). Events still
// recorded after Close go to the other instruments as before. Close
// never closes a registry.
func (i *Instrumentation) Close() error {
	i.mu.Lock()
	i.status = nil
	i.mu.Unlock()
	return i.reg.Unregister()
}

// WatchStatus implements [observe.StatusWatcher]: the registry hands over
// the function that returns its clients' Status, read at once (each
// system's BASE_URL and routes) and at every collection.
func (i *Instrumentation) WatchStatus(status func() []observe.Status) {
	i.mu.Lock()
	i.status = append(i.status, status)
	i.mu.Unlock()
	for _, st := range status() {
		i.system(st.System).learnStatus(&st)
	}
}

// collect is the callback of the instruments read from Status.
func (i *Instrumentation) collect(_ context.Context, o metric.Observer) error {
	i.mu.Lock()
	watched := slices.Clone(i.status)
	i.mu.Unlock()
	for _, status := range watched {
		for _, st := range status() {
			s := i.system(st.System)
			s.learnStatus(&st)
			i.m.observeStatus(o, s, &st)
		}
	}
	return nil
}

// system returns the resolved attribute sets of the named system,
// creating them on first use.
func (i *Instrumentation) system(name string) *system {
	if s, ok := (*i.systems.Load())[name]; ok {
		return s
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	cur := *i.systems.Load()
	if s, ok := cur[name]; ok {
		return s
	}
	s := newSystem(name)
	next := make(map[string]*system, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[name] = s
	i.systems.Store(&next)
	return s
}

// The attribute keys of outbound's own, beside the semantic conventions'.
const (
	// SystemKey names the system of the registry (the prefix of its
	// variables, lower case): "payments".
	SystemKey = attribute.Key("outbound.system")
	// OutcomeKey is how a call or an attempt ended, as
	// [observe.Outcome] names it: "ok", "gave_up", "breaker_open", ...
	OutcomeKey = attribute.Key("outbound.outcome")
	// RefusalReasonKey is why a call was refused before anything was
	// sent, as the refusal header of HTTPClient says it
	// ([observe.Op.Reason]): "breaker-open", "bulkhead-full", ...
	RefusalReasonKey = attribute.Key("outbound.refusal.reason")
	// RouteKey is the declared route (<P>_ROUTES) a call ran on:
	// "get-charge". Route names come from configuration, so it is
	// bounded; a call on no route has none.
	RouteKey = attribute.Key("outbound.route")
	// AttemptsKey is the number of attempts a call sent (the call
	// span's), redirect hops and hedges included.
	AttemptsKey = attribute.Key("outbound.attempts")
	// BreakerStateKey is a breaker state: "closed", "half-open", "open".
	BreakerStateKey = attribute.Key("outbound.breaker.state")
	// BreakerFromKey and BreakerToKey are the states of a breaker's
	// transition.
	BreakerFromKey = attribute.Key("outbound.breaker.from")
	BreakerToKey   = attribute.Key("outbound.breaker.to")
	// DirectionKey is where an adaptive bulkhead limit moved: "up" or
	// "down".
	DirectionKey = attribute.Key("outbound.bulkhead.direction")
)
