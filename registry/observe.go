package registry

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/config"
)

// Outcome says how an attempt or a call ended.
type Outcome uint8

// The outcomes of attempts and calls.
const (
	OutcomeOK           Outcome = iota // a response the caller gets (any status not retried)
	OutcomeRetry                       // attempt failed and will be retried
	OutcomeGaveUp                      // failed and retries ran out, were not allowed, or would pass the deadline
	OutcomeBreakerOpen                 // rejected by the breaker, no I/O
	OutcomeBulkheadFull                // rejected by the bulkhead, no I/O
	OutcomeBudgetSpent                 // the caller's budget was spent before any I/O
	OutcomeRetryBudget                 // a retry was denied by the retry budget
	OutcomeCanceled                    // the caller cancelled
	OutcomeHedgeLost                   // attempt cancelled: another copy of it (hedging) answered first
)

var outcomeNames = [...]string{"ok", "retry", "gave_up", "breaker_open", "bulkhead_full", "budget_spent", "retry_budget_spent", "canceled", "hedge_lost"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// AttemptEvent describes one attempt sent to the transport (or refused by
// the breaker).
type AttemptEvent struct {
	System   string
	Method   string
	Host     string
	Path     string // the route set with WithRoute, else the raw request path
	Attempt  int    // 1 for the first attempt
	Hedge    int    // 0, or k for the k-th copy of the attempt sent by hedging (HEDGE_DELAY)
	Won      bool   // this copy's answer went to the caller, in a race of several copies
	Status   int    // 0 when there was no response
	Err      error  // nil when there was a response
	Duration time.Duration
	Outcome  Outcome
	// Injected is true when fault injection (a drill) aborted or
	// delayed the attempt: its figures are not the upstream's.
	Injected bool
}

// CallEvent describes one call from the caller's point of view, from entry
// to the response headers (or the error).
type CallEvent struct {
	System   string
	Method   string
	Attempts int
	Status   int
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
// a breaker's state as Status shows it, a fleet's included ([StateReporter]).
// Methods are called synchronously on the call's goroutine (a fleet's
// changes: on the fleet's) and must be quick; ObserveBreaker runs while the
// breaker holds its lock, so it must never call back into the client.
// Implementations must be safe for concurrent use.
type Observer interface {
	ObserveAttempt(AttemptEvent)
	ObserveCall(CallEvent)
	ObserveBreaker(system string, from, to BreakerState)
}

// Option configures a registry in code. Settings that operators tune live
// in the environment (package config); options are for what only code
// can give: observers, loggers, transport wrappers.
type Option interface {
	apply(*options)
}

type options struct {
	observers []Observer
	logger    *slog.Logger
	wrap      func(system string, rt http.RoundTripper) http.RoundTripper
	faultSeed *uint64 // WithFaultSeed; nil: random
	fleet     func(system string, settings config.Client, local Circuit) (Circuit, error)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithObserver adds an observer of every attempt, call and breaker
// transition. Several may be added; they run in order.
func WithObserver(o Observer) Option {
	return optionFunc(func(opts *options) { opts.observers = append(opts.observers, o) })
}

// WithLogger logs one record per attempt (Debug for successes, Info for
// retries and failures) and every breaker transition (Warn). The default
// logs nothing. Records carry the host and the path, never the userinfo
// or the query; a path that holds identifiers or secrets
// ("/password-resets/<token>") should be labelled with [WithRoute].
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(opts *options) { opts.logger = l })
}

// WithTransportWrapper wraps each system's transport, inside the breaker
// (so it sees every attempt). Use it for tracing, e.g.
//
//	registry.WithTransportWrapper(func(system string, rt http.RoundTripper) http.RoundTripper {
//		return otelhttp.NewTransport(rt)
//	})
//
// The wrapper must return a RoundTripper that honours the request's
// context.
func WithTransportWrapper(wrap func(system string, rt http.RoundTripper) http.RoundTripper) Option {
	return optionFunc(func(opts *options) { opts.wrap = wrap })
}

type routeKey struct{}

// WithRoute labels the calls made with ctx with route, a path template
// such as "/stock/{isbn}": observers (logs, metrics, traces) see the route
// instead of the raw path, which keeps identifiers and secrets in paths
// out of them and keeps label sets small.
func WithRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

// pathOf returns the route of req's context, or its raw path.
func pathOf(req *http.Request) string {
	if r, ok := req.Context().Value(routeKey{}).(string); ok {
		return r
	}
	return req.URL.Path
}
