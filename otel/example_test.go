package otel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	outboundotel "github.com/outbound-go/outbound/otel"
	"github.com/outbound-go/outbound/registry"
)

// A registry instrumented with one option. The service's own meter and
// tracer providers and propagator stand here for the ones it sets up at
// start (an OTLP exporter, say); the test readers show what they get.
func Example() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "traceparent sent: %t", r.Header.Get("traceparent") != "")
	}))
	defer upstream.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	inst, err := outboundotel.New(outboundotel.WithMeterProvider(mp), outboundotel.WithTracerProvider(tp),
		outboundotel.WithPropagators(propagation.TraceContext{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inst.Close()

	loaded, err := config.LoadEnv(map[string]string{"OUTBOUND_SYSTEMS": "inventory", "INVENTORY_BASE_URL": upstream.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg, err := registry.New(loaded, inst.Option())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()

	// The route keeps the ISBN out of the metrics' attributes.
	ctx := observe.WithRoute(context.Background(), "/stock/{isbn}")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/stock/42", nil)
	resp, err := reg.MustClient("inventory").Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))

	for _, s := range spans.Ended() {
		fmt.Println("span:", s.SpanKind(), s.Name())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "http.client.request.duration" {
			route, _ := h.DataPoints[0].Attributes.Value("url.template")
			names = append(names, m.Name+" url.template="+route.AsString())
			continue
		}
		names = append(names, m.Name)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Println("metric:", n)
	}
	// Output:
	// traceparent sent: true
	// span: client GET /stock/{isbn}
	// span: internal GET /stock/{isbn}
	// metric: http.client.active_requests
	// metric: http.client.request.duration url.template=/stock/{isbn}
	// metric: outbound.breaker.state
	// metric: outbound.bulkhead.capacity
	// metric: outbound.bulkhead.in_flight
	// metric: outbound.bulkhead.limit
	// metric: outbound.call.duration
	// metric: outbound.calls
	// metric: outbound.hedges.sent
	// metric: outbound.hedges.won
	// metric: outbound.retries
}
