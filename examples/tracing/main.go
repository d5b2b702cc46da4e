package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	outboundotel "github.com/outbound-go/outbound/otel"
	"github.com/outbound-go/outbound/registry"
)

func main() {
	if err := demo(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func demo() error {
	if os.Getenv("INVENTORY_BASE_URL") == "" {
		// No upstream given: serve a local one that fails once.
		srv := flakyUpstream()
		defer srv.Close()
		_ = os.Setenv("INVENTORY_BASE_URL", srv.URL)
		_ = os.Setenv("INVENTORY_BACKOFF_BASE", "20ms")
	}
	body, err := run(context.Background(), os.Stdout)
	if err != nil {
		return err
	}
	fmt.Println("call done:", body)
	return nil
}

// run sets up the OpenTelemetry SDK as a service does at start (here
// with the stdout exporter writing each span to spans as one JSON line;
// a service would export over OTLP), builds the registry with the
// instrumentation, and makes one call under the span of an inbound
// request. It returns the upstream's answer.
func run(ctx context.Context, spans io.Writer) (string, error) {
	exporter, err := stdouttrace.New(stdouttrace.WithWriter(spans))
	if err != nil {
		return "", err
	}
	// WithSyncer exports each span as it ends, so that the demo's
	// output is complete when the call returns; use WithBatcher in a
	// service.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(ctx)

	inst, err := outboundotel.New(outboundotel.WithTracerProvider(tp),
		outboundotel.WithPropagators(propagation.TraceContext{}))
	if err != nil {
		return "", err
	}
	defer inst.Close()
	reg, err := registry.FromEnvWith([]config.System{{Name: "inventory"}}, inst.Option())
	if err != nil {
		return "", err
	}
	defer reg.Close()

	// The inbound request's span; in a service the server middleware
	// (otelhttp.NewHandler) starts it.
	ctx, span := tp.Tracer("bookstore").Start(ctx, "GET /books/{isbn}", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	return stock(ctx, reg.MustClient("inventory"), "42")
}

// stock asks the inventory for an ISBN's stock, as an outbound adapter
// would: the route labels the call, the client does the rest.
func stock(ctx context.Context, c *registry.Client, isbn string) (string, error) {
	ctx = observe.WithRoute(ctx, "/stock/{isbn}")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/stock/"+isbn, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("inventory: status %d", resp.StatusCode)
	}
	return string(body), nil
}

// flakyUpstream answers 503 to its first request and 200 to the others,
// so the demo shows a retry as a second attempt span of the same call.
// Its answer says which traceparent it got.
func flakyUpstream() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"isbn":"42","stock":7,"traceparent":%q}`, r.Header.Get("Traceparent"))
	}))
}
