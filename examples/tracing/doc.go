// Command tracing shows how to trace every attempt of an outbound
// registry with registry.WithTransportWrapper, without OpenTelemetry: a
// hand-written RoundTripper opens a span-like record per attempt, sends
// the W3C traceparent header upstream and logs the span (trace and span
// ids, parent, system, method, host, path, status, duration) with slog.
//
// The wrapper sits inside the breaker and the retry loop, so each retry
// is a span of its own, a child of the caller's span:
//
//	go run ./examples/tracing
//
// starts a local upstream that fails the first request with 503, and
// logs two spans of one trace for the one call. Set INVENTORY_BASE_URL
// to trace calls to a real system instead.
//
// With OpenTelemetry the wrapper is one line; see the comment on
// newRegistry in main.go.
package main
