// Package otel instruments an outbound registry with OpenTelemetry:
// metrics under the HTTP client semantic conventions, outbound's own
// resilience metrics, a span per call with a child span per attempt, and
// the trace context sent upstream by the configured propagators. It lives
// in a module of its own (github.com/outbound-go/outbound/otel) so that
// the core stays free of OpenTelemetry; alias it when the API's package
// is imported beside it:
//
//	import (
//		"go.opentelemetry.io/otel"
//		outboundotel "github.com/outbound-go/outbound/otel"
//	)
//
//	inst, err := outboundotel.New() // the global providers and propagator
//	if err != nil {
//		return err
//	}
//	reg, err := registry.FromEnvWith(systems, inst.Option())
//
// [WithMeterProvider], [WithTracerProvider] and [WithPropagators] give
// other providers than the global ones. One option wires everything:
// [Instrumentation] is the registry's observer, its tracer and the
// watcher of its Status.
//
// # Metrics
//
// Under the HTTP client semantic conventions (stable), for each request
// sent to the upstream (each attempt: first, retry, hedge, redirect hop;
// never a call refused before sending, nor a fault injected by a drill):
//
//   - http.client.request.duration (histogram, s, the conventions'
//     buckets): http.request.method ("_OTHER" for a method they do not
//     know), server.address and server.port (see below),
//     http.response.status_code when there was a response, error.type
//     (the status for 400 and above, else the op that ended the attempt:
//     "connect timeout", "read timeout", "canceled", ...), url.template
//     when the caller gave a route with observe.WithRoute or the call ran
//     on a declared route (the path of its pattern: "/v1/charges/{id}"),
//     outbound.route on a declared route, and outbound.system.
//   - http.client.active_requests (up-down counter, {request}): requests
//     in flight, by http.request.method, server.address, server.port and
//     outbound.system.
//
// outbound's own, each with outbound.system:
//
//   - outbound.calls (counter, {call}): every call by outbound.outcome
//     ([observe.Outcome]: ok, failed, gave_up, retry_throttled,
//     canceled, and the refusals breaker_open, forced_open,
//     bulkhead_full, budget_spent, rate_limited, which sent nothing),
//     and outbound.route on a declared route.
//   - outbound.call.duration (histogram, s): calls that sent at least one
//     attempt, by outbound.outcome (and outbound.route), retries and
//     backoff included.
//   - outbound.breaker.transitions (counter): by outbound.breaker.from and
//     outbound.breaker.to; a route's own breaker
//     (<P>_ROUTE_<R>_BREAKER=own) with outbound.route.
//   - outbound.bulkhead.adjustments (counter): large moves of an adaptive
//     limit, by outbound.bulkhead.direction (up, down).
//   - outbound.injected.attempts (counter): drills only, by
//     outbound.outcome.
//
// and read from the clients' Status at each collection:
//
//   - outbound.breaker.state (gauge): 1 for the current state, 0 for the
//     others, by outbound.breaker.state (closed, half-open, open); a
//     route's own breaker with outbound.route.
//   - outbound.bulkhead.in_flight, outbound.bulkhead.limit,
//     outbound.bulkhead.capacity (up-down counters, {call}).
//   - outbound.retries, outbound.hedges.sent, outbound.hedges.won
//   - outbound.breaker.forced (an operator's override, by state),
//     outbound.rate.share, outbound.rate.tokens, outbound.rate.paused,
//     outbound.rate.refused (RATE_LIMIT)
//     (counters, totals since the registry was built).
//   - outbound.fleet.synced (gauge, 1 or 0): systems at
//     BREAKER_SCOPE=fleet only.
//
// Every attribute of the metrics is bounded by the code and the
// configuration, never by what an upstream answers: no raw path, no
// query, no user input but a route the caller chose.
//
//   - server.address and server.port are BASE_URL's (its port, or its
//     scheme's default) for every request to its origin. A request to
//     another origin, which only a redirect hop can be
//     (FOLLOW_REDIRECTS=any; the registry refuses any other), has
//     server.address "_OTHER" and no server.port, whatever host and port
//     the Location named: one series however many the upstream names,
//     rather than BASE_URL's, which would blame the system for a third
//     party's answers. BASE_URL is read from the registry's Status when
//     it is built; an Instrumentation whose events come through another
//     observer takes the first host a system reports as its origin (a
//     call's first hop always goes to BASE_URL's).
//   - http.response.status_code is recorded for 100 to 599; a status out
//     of that range (which an upstream can send: "999") has none, and
//     error.type "_OTHER".
//   - outbound.route and url.template come from the declared routes
//     (<P>_ROUTES) and observe.WithRoute, both written by the service.
//
// The spans are not series: an attempt span names the server its request
// went to, and the status it got, whatever they were.
//
// # Spans
//
// Each call is a span of kind internal named by its method and its
// url.template when it has one ("GET /v1/charges/{id}"), with
// http.request.method, outbound.system, url.template and outbound.route
// (as in the metrics), server.address and server.port (from its first
// attempt), outbound.attempts, and at its end
// http.response.status_code, or error.type (the registry's op: "breaker open",
// "call timeout", ...) and an error status. A call refused before
// anything was sent has no attempt span, and an event [RefusalEvent] with
// outbound.refusal.reason ("breaker-open", "bulkhead-full",
// "budget-spent", "forced-open", "rate-limited": the words of
// HTTPClient's refusal header) and outbound.outcome.
//
// Each attempt is a child span of kind client, named as its call, with
// http.request.method, server.address, server.port, url.full,
// url.template and outbound.route when its call has them,
// outbound.system, http.request.resend_count for every attempt
// after the first of its call (retries, hedges and redirect hops alike),
// and at its end http.response.status_code and network.protocol.version,
// or error.type and an error status. A status of 400 or more is an error
// of the span, as the conventions say for a client. The propagators write
// the attempt's context (traceparent) into a copy of its headers; the
// caller's request is never modified.
//
// url.full is the URL sent, BASE_URL's path included
// ("https://api.example/v1/stock/42" for "/stock/42" under
// "https://api.example/v1"), redacted as the conventions ask: no
// userinfo (net/http sends it as an Authorization header, not in the
// URL), no fragment (never sent), and every query value REDACTED but for
// names known to be safe (page, limit, sort, ...: config.RedactURL's
// rule, the registry's errors'). The path is shown as sent, as the
// conventions require of url.full on a client span, even when the caller
// gave a route: the route names the spans and is their url.template, and
// the metrics never carry a path.
//
// The events that tell the metrics a call's route come after its spans
// have started, so the spans find the route themselves, as the registry
// does: a recording call span matches its request with net/http's
// ServeMux against the routes' patterns (a relative path joined to
// BASE_URL's), and its attempts, redirect hops included, inherit it. The
// routes are read from the registry's Status when it is built and at
// each collection of the metrics: a live change of the routes
// (OUTBOUND_CONFIG_FILE) reaches the spans at the next collection. A
// span that records nothing matches nothing.
//
// Spans end when the response headers arrive (or the error): the body's
// transfer is not in them, as it is not in the durations of the metrics.
// A call span that records nothing (no SDK, or a sampler that drops it)
// costs nothing more than starting it: its attempts then start from the
// caller's context, and the trace context still goes upstream.
//
// An Instrumentation may serve several registries; their system names
// must differ, as the metrics of one name are one series.
//
// # Not covered
//
// The events carry no context, so the metrics have no exemplars. Request
// and response body sizes, connection metrics
// (http.client.open_connections, http.client.connection.duration) and
// logs are not recorded; the registry's log records are the logger's
// (registry.WithLogger).
package otel
