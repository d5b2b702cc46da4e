package otel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outbound-go/outbound/config"
	outboundotel "github.com/outbound-go/outbound/otel"
	"github.com/outbound-go/outbound/registry"
)

// discard is a span processor that drops every span once ended: the
// spans are recorded and sampled, their export costs nothing.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// BenchmarkCall measures one loopback call through a registry without an
// observer, with the instrumentation on the global providers (a service
// that set up no OpenTelemetry SDK), and with the SDK's meter and tracer
// (every span sampled and recorded, then dropped). The ratio of the last
// to the first is the cost of the instrumentation; cpu-ns/op (client and
// loopback server together) is the figure to compare on a loaded
// machine, where wall time mostly measures the neighbours:
//
//	go test -run '^$' -bench Call -benchmem -count 6 ./otel/
func BenchmarkCall(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer up.Close()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}))
	defer tp.Shutdown(context.Background())

	for _, bc := range []struct {
		name string
		opts []outboundotel.Option // nil: no observer
	}{
		{"none", nil},
		{"otel-global", []outboundotel.Option{}},
		{"otel-sdk", []outboundotel.Option{outboundotel.WithMeterProvider(mp), outboundotel.WithTracerProvider(tp),
			outboundotel.WithPropagators(propagation.TraceContext{})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var ropts []registry.Option
			if bc.opts != nil {
				inst, err := outboundotel.New(bc.opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer inst.Close()
				ropts = append(ropts, inst.Option())
			}
			c := benchClient(b, up.URL, ropts...)
			b.ReportAllocs()
			cpu := benchCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchGet(b, c)
				}
			})
			if cpu := benchCPU() - cpu; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

func benchClient(b *testing.B, base string, opts ...registry.Option) *registry.Client {
	b.Helper()
	loaded, err := config.LoadEnv(map[string]string{"OUTBOUND_SYSTEMS": "inventory", "INVENTORY_BASE_URL": base,
		"INVENTORY_MAX_CONCURRENT": "64"})
	if err != nil {
		b.Fatal(err)
	}
	reg, err := registry.New(loaded, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Close() })
	return reg.MustClient("inventory")
}

func benchGet(b *testing.B, c *registry.Client) {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "/stock/42", nil)
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}
