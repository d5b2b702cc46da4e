package registry

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// Option configures a registry in code. Settings that operators tune live
// in the environment (package config); options are for what only code
// can give: observers, loggers, transport wrappers.
type Option interface {
	apply(*options)
}

type options struct {
	observers []observe.Observer
	logger    *slog.Logger
	wrap      func(system string, rt http.RoundTripper) http.RoundTripper
	faultSeed *uint64 // WithFaultSeed; nil: random
	fleet     func(system string, settings config.Client, local Circuit) (Circuit, error)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithObserver adds an observer of every attempt, call and breaker
// transition. Several may be added; they run in order.
func WithObserver(o observe.Observer) Option {
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
