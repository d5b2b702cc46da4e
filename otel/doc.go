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
//     know), server.address, server.port, http.response.status_code when
//     there was a response, error.type (the status for 400 and above, else
//     the op that ended the attempt: "connect timeout", "read timeout",
//     "canceled", ...), url.template only when the caller gave a route
//     with observe.WithRoute, and outbound.system.
//   - http.client.active_requests (up-down counter, {request}): requests
//     in flight, by http.request.method, server.address, server.port and
//     outbound.system.
//
// outbound's own, each with outbound.system:
//
//   - outbound.calls (counter, {call}): every call by outbound.outcome
//     ([observe.Outcome]: ok, failed, gave_up, retry_throttled,
//     canceled, and the refusals breaker_open, forced_open,
//     bulkhead_full, budget_spent, rate_limited, which sent nothing).
//   - outbound.call.duration (histogram, s): calls that sent at least one
//     attempt, by outbound.outcome, retries and backoff included.
//   - outbound.breaker.transitions (counter): by outbound.breaker.from and
//     outbound.breaker.to.
//   - outbound.bulkhead.adjustments (counter): large moves of an adaptive
//     limit, by outbound.bulkhead.direction (up, down).
//   - outbound.injected.attempts (counter): drills only, by
//     outbound.outcome.
//
// and read from the clients' Status at each collection:
//
//   - outbound.breaker.state (gauge): 1 for the current state, 0 for the
//     others, by outbound.breaker.state (closed, half-open, open).
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
// Every attribute is bounded: no raw path, no query, no user input but a
// route the caller chose.
//
// # Spans
//
// Each call is a span of kind internal named by its method ("GET"), with
// http.request.method, outbound.system, server.address and server.port
// (from its first attempt), outbound.attempts, and at its end
// http.response.status_code, or error.type (the registry's op: "breaker",
// "call timeout", ...) and an error status. A call refused before
// anything was sent has no attempt span, and an event [RefusalEvent] with
// outbound.refusal.reason ("breaker-open", "bulkhead-full",
// "budget-spent", "forced-open", "rate-limited": the words of
// HTTPClient's refusal header) and outbound.outcome.
//
// Each attempt is a child span of kind client, named by its method, with
// http.request.method, server.address, server.port, url.full (no
// userinfo, token-like query values redacted, as the registry's errors
// show it), outbound.system, http.request.resend_count for every attempt
// after the first of its call (retries, hedges and redirect hops alike),
// and at its end http.response.status_code and network.protocol.version,
// or error.type and an error status. A status of 400 or more is an error
// of the span, as the conventions say for a client. The propagators write
// the attempt's context (traceparent) into a copy of its headers; the
// caller's request is never modified.
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
