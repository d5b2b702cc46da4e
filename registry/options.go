package registry

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// Option configures a registry in code. Settings that operators tune live
// in the environment (package config); options are for what only code
// can give: observers, loggers, transport wrappers, a fleet.
type Option interface {
	apply(*options)
}

type options struct {
	observers []observe.Observer
	logger    *slog.Logger
	wrap      func(system string, rt http.RoundTripper) http.RoundTripper
	faultSeed *uint64 // WithFaultSeed; nil: random
	fleet     Fleet
	// certInterval is how often a client certificate's files are looked
	// at; zero: certCheckInterval (tests shorten it).
	certInterval time.Duration
	reloadEvery  time.Duration // WithReloadInterval; zero: DefaultReloadInterval
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithObserver adds an observer of every attempt, call and breaker
// transition (package observe). Several may be added; they run in order.
// An observer that also implements observe.Tracer wraps each system's
// calls and transport, one that implements observe.StatusWatcher is
// handed the registry's Status, and one that implements
// observe.LimitObserver hears of adaptive limits.
func WithObserver(o observe.Observer) Option {
	return optionFunc(func(opts *options) { opts.observers = append(opts.observers, o) })
}

// WithLogger logs one record per attempt (Debug for successes, Info for
// retries and failures), one per call refused before any attempt
// (Info, at most one a second per system and reason, with the count of
// those not logged), and every breaker transition (Warn). The default
// logs nothing. Attributes follow OpenTelemetry's names where one exists
// (outbound.system, http.request.method, server.address, server.port,
// url.path or url.template, http.request.resend_count,
// http.response.status_code, error.type, exception.message) and
// outbound's own otherwise (outbound.outcome, outbound.duration_ms,
// outbound.hedge, outbound.won, outbound.injected, outbound.suppressed).
// Records carry the host and the path, never the userinfo or the query;
// a path that holds identifiers or secrets ("/password-resets/<token>")
// should be labelled with observe.WithRoute.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(opts *options) { opts.logger = l })
}

// WithTransportWrapper wraps each system's transport, inside the breaker
// (so it sees every attempt). The wrapper must return a RoundTripper that
// honours the request's context. For tracing, an observer implementing
// observe.Tracer (module github.com/outbound-go/outbound/otel) does it
// with the call's span as parent.
func WithTransportWrapper(wrap func(system string, rt http.RoundTripper) http.RoundTripper) Option {
	return optionFunc(func(opts *options) { opts.wrap = wrap })
}

// WithFaultSeed fixes the seed of every system's fault injection, so a
// drill replays the same sequence of faults for the same order of
// attempts (tests). Without it each system draws a random seed. It
// injects nothing by itself: the FAULT_* settings and OUTBOUND_FAULTS=on
// do.
func WithFaultSeed(seed uint64) Option {
	return optionFunc(func(o *options) { o.faultSeed = &seed })
}

// WithStream returns a copy of ctx that makes a call through [Client.Do]
// or [Client.HTTPClient] a stream: its response body (server-sent events,
// a long download, an LLM's tokens) may outlive CALL_TIMEOUT, bounded
// instead by idle, the longest time between two reads.
//
// Until the response headers arrive, nothing changes: CONNECT_TIMEOUT and
// READ_TIMEOUT bound each attempt, and CALL_TIMEOUT bounds the attempts
// and retries together. From the headers on, the body is read with no
// overall deadline: a read that waits longer than idle for data, or a
// caller that does not read again within idle, ends the call with an
// [*Error] of observe.OpIdleTimeout (Timeout() is true) and gives the
// permit back. The caller's own deadline, when ctx has one, still bounds
// the whole stream. The bulkhead permit is held until the body is closed
// (or read to EOF, or the idle bound fires): each open stream counts
// against MAX_CONCURRENT, so size it for the streams open at once plus
// the other calls.
//
// An idle of zero or less leaves ctx unchanged: the call is bounded by
// CALL_TIMEOUT as usual.
func WithStream(ctx context.Context, idle time.Duration) context.Context {
	return withStreamIdle(ctx, idle)
}
