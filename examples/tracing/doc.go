// Command tracing shows how to trace an outbound registry with
// OpenTelemetry: the module github.com/outbound-go/outbound/otel is one
// registry option, and the OpenTelemetry SDK (here its stdout exporter)
// gets a span per call with a child span per attempt, the W3C
// traceparent sent upstream on each attempt, and the HTTP client
// metrics:
//
//	inst, err := outboundotel.New(outboundotel.WithTracerProvider(tp))
//	reg, err := registry.FromEnvWith(systems, inst.Option())
//
//	go run ./examples/tracing
//
// starts a local upstream that fails the first request with 503, and
// prints, as JSON lines, the spans of one trace: the two attempts (the
// 503, then the retry with http.request.resend_count 1), the call around
// them and the inbound request's span around it. Set INVENTORY_BASE_URL
// to trace calls to a real system instead.
package main
