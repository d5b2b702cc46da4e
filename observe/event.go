package observe

import (
	"context"
	"net/http"
	"time"
)

// AttemptEvent describes one attempt: a request sent to the transport,
// or refused on its way there (by the breaker or the rate limit).
type AttemptEvent struct {
	System string
	// RouteName is the system's route the call ran on (<P>_ROUTES), or
	// "" for the system's own settings: bounded by what is declared.
	RouteName string
	Method    string
	Host      string // host[:port] of the request's URL
	// Path is the route set with WithRoute, else the raw path
	// (never the query or the userinfo).
	Path string
	// Route is the route set with WithRoute ("/stock/{isbn}"), else
	// the path of the pattern of the declared route the call ran on
	// ("/v1/charges/{id}"), or "": a bounded label (url.template).
	Route   string
	Attempt int  // 1 for the first attempt
	Hedge   int  // 0, or k for the k-th copy of the attempt sent by hedging (HEDGE_DELAY)
	Won     bool // this copy's answer went to the caller, in a race of several copies
	Status  int  // 0 when there was no response
	// Op is what ended the attempt without a response; 0 when there was
	// one.
	Op       Op
	Err      error // nil when there was a response
	Duration time.Duration
	Outcome  Outcome
	// Injected is true when fault injection (a drill) aborted or
	// delayed the attempt: its figures are not the upstream's.
	Injected bool
}

// CallEvent describes one call from the caller's point of view, from entry
// to the response headers (or the error).
type CallEvent struct {
	System string
	// RouteName is the system's route the call ran on (<P>_ROUTES), or
	// "" for the system's own settings.
	RouteName string
	Method    string
	Attempts  int // attempts sent; 0 for a call refused before any
	Status    int // the status the caller got; 0 for an error
	// Op is what ended the call without a response; 0 when it got one.
	Op       Op
	Err      error
	Duration time.Duration
	Outcome  Outcome
}

// BreakerState is the state of a system's circuit breaker.
type BreakerState string

// The breaker states, as gobreaker names them.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerHalfOpen BreakerState = "half-open"
	BreakerOpen     BreakerState = "open"
)

// Observer receives the events of every client of a registry: metrics,
// logs, traces, a status page. ObserveBreaker is told of every change of
// a breaker's state as Status shows it, a fleet's included. Methods are
// called synchronously on the call's goroutine (a fleet's changes: on
// the fleet's) and must be quick; ObserveBreaker runs while the breaker
// holds its lock, so it must never call back into the client.
// Implementations must be safe for concurrent use.
type Observer interface {
	ObserveAttempt(AttemptEvent)
	ObserveCall(CallEvent)
	ObserveBreaker(system string, from, to BreakerState)
}

// LimitEvent says that a system's adaptive bulkhead limit moved by a
// quarter or more since the last event (or since the ceiling, its
// starting point).
type LimitEvent struct {
	System   string
	From, To int64 // the limit before and after
	Ceiling  int64 // MAX_CONCURRENT
}

// LimitObserver is an optional interface of an [Observer]: one that
// implements it is also told of the large moves of a system's adaptive
// limit (ADAPTIVE_CONCURRENCY=true). ObserveLimit runs while the bulkhead
// holds its lock: it must be quick and must not call back into the
// client.
type LimitObserver interface {
	ObserveLimit(LimitEvent)
}

// PauseObserver is an optional interface of an [Observer]: it is told
// when the upstream pauses a system (a 429 or 503 with Retry-After, or
// rate-limit headers that say nothing is left until a reset): its
// requests are refused, or wait, until until. It is told once per pause,
// not for each response that extends one in force. status is the
// response's, or 0 when the pause came from another pod's upstream (at
// RATE_SCOPE=fleet).
type PauseObserver interface {
	ObservePause(system string, until time.Time, status int)
}

// RouteBreakerObserver is an optional interface of an [Observer]: it is
// told of every change of the state of a route's own breaker
// (<P>_ROUTE_<R>_BREAKER=own), which ObserveBreaker, the system's, is
// not. It runs while the breaker holds its lock: it must be quick and
// must not call back into the client.
type RouteBreakerObserver interface {
	ObserveRouteBreaker(system, route string, from, to BreakerState)
}

// ForceObserver is an optional interface of an [Observer]: it is told
// when an operator forces a system's breaker open or closed until until,
// or releases it (state "", until zero), on this pod.
type ForceObserver interface {
	ObserveForce(system string, state BreakerState, until time.Time)
}

// Tracer is an optional interface of an [Observer] that traces the calls
// it observes. When a registry builds a system's client it wraps, once:
//
//   - the system's calls with TraceCall: next runs the whole pipeline of
//     one call, refusals included, for Do and HTTPClient alike, and
//     returns as Do does: a response, or an error that is the registry's
//     own *registry.Error, which the wrapper must return as it is;
//   - the system's transport with TraceAttempt: next sends one attempt
//     (a first attempt, a retry, a hedge or a redirect), inside the
//     circuit breaker, under the context of its call.
//
// A wrapper must honour the request's context and must not retry.
type Tracer interface {
	TraceCall(system string, next http.RoundTripper) http.RoundTripper
	TraceAttempt(system string, next http.RoundTripper) http.RoundTripper
}

// StatusWatcher is an optional interface of an [Observer] that reads the
// clients' [Status] when it needs them (a metrics collection, say): once
// a registry is built, it hands each such observer a function that
// returns the Status of every one of its clients, in declaration order.
// An observer given to several registries is handed one function each.
type StatusWatcher interface {
	WatchStatus(status func() []Status)
}

type routeKey struct{}

// WithRoute labels the calls made with ctx with route, a path template
// such as "/stock/{isbn}": logs and metrics see the route instead of the
// raw path, which keeps identifiers and secrets in paths out of them and
// keeps label sets small; a span carries it as url.template beside the
// URL sent (redacted).
func WithRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

// Route returns the route WithRoute put in ctx, or "".
func Route(ctx context.Context) string {
	r, _ := ctx.Value(routeKey{}).(string)
	return r
}
