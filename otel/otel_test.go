package otel_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/observe"
	outboundotel "github.com/outbound-go/outbound/otel"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a registry instrumented with the OTel SDK's own test readers: a
// ManualReader for the metrics and a SpanRecorder for the spans.
type rig struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reg    *registry.Registry
}

// newRig builds a registry from env (registrytest: config.LoadEnv and
// registry.New, closed and checked clean at the end of the test),
// instrumented by one Instrumentation with the W3C trace context.
func newRig(t *testing.T, env map[string]string) *rig {
	t.Helper()
	r := &rig{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	inst, err := outboundotel.New(outboundotel.WithMeterProvider(mp), outboundotel.WithTracerProvider(r.tp),
		outboundotel.WithPropagators(propagation.TraceContext{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = inst.Close()
		_ = mp.Shutdown(context.Background())
		_ = r.tp.Shutdown(context.Background())
	})
	r.reg = registrytest.New(t, env, registrytest.With(inst.Option()))
	return r
}

// get calls path on system with a bounded context (labelled with route
// unless it is ""), reads the body and closes it.
func (r *rig) get(t *testing.T, ctx context.Context, system, path, route string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if route != "" {
		ctx = observe.WithRoute(ctx, route)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.reg.MustClient(system).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// point is one data point of a metric: its attributes, and its value
// (a histogram's: its count).
type point struct {
	attrs map[string]string
	value float64
}

func (p point) String() string {
	keys := slices.Sorted(maps.Keys(p.attrs))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + p.attrs[k] + " ")
	}
	return b.String()
}

// collect reads every metric once, by name.
func (r *rig) collect(t *testing.T) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != outboundotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, outboundotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = append(out[m.Name], points(m.Data)...)
		}
	}
	return out
}

func points(data metricdata.Aggregation) []point {
	var out []point
	add := func(set attribute.Set, v float64) {
		attrs := map[string]string{}
		for _, kv := range set.ToSlice() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		out = append(out, point{attrs, v})
	}
	switch d := data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Count))
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Value))
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Value))
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, p.Value)
		}
	}
	return out
}

// value returns the value of name's one point whose attributes include
// want, failing the test when not exactly one matches.
func value(t *testing.T, got map[string][]point, name string, want map[string]string) float64 {
	t.Helper()
	var match []point
	for _, p := range got[name] {
		if includes(p.attrs, want) {
			match = append(match, p)
		}
	}
	if len(match) != 1 {
		t.Fatalf("%s: %d points with %v, want 1; all: %v", name, len(match), want, got[name])
	}
	return match[0].value
}

func includes(attrs, want map[string]string) bool {
	for k, v := range want {
		if attrs[k] != v {
			return false
		}
	}
	return true
}

// names returns the sorted names of the metrics collected.
func names(got map[string][]point) []string {
	out := slices.Collect(maps.Keys(got))
	sort.Strings(out)
	return out
}

// env returns the variables of one system "inventory" at base, with
// extra ones (without the prefix: "RETRIES": "2").
func env(base string, extra map[string]string) map[string]string {
	e := map[string]string{"OUTBOUND_SYSTEMS": "inventory", "INVENTORY_BASE_URL": base}
	for k, v := range extra {
		e["INVENTORY_"+k] = v
	}
	return e
}
