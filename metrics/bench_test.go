package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// BenchmarkCallOverhead measures what observability adds to one call: a
// registry client sends GET to a loopback server and reads the body,
// with no observer, with a logger whose level (Error) drops every
// attempt record, and with the Prometheus metrics. Compare the ns/op and
// allocs/op of the sub-benchmarks; on loopback the I/O dominates ns/op,
// so allocs/op is the steadier figure:
//
//	go test -run '^$' -bench CallOverhead -benchmem -count 6 ./metrics/
func BenchmarkCallOverhead(b *testing.B) {
	srv := outboundtest.NewUpstream(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	b.Setenv("OUTBOUND_SYSTEMS", "inv")
	b.Setenv("INV_BASE_URL", srv.URL)

	run := func(b *testing.B, opts ...registry.Option) {
		r, err := registry.FromEnvWith(nil, opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		c := r.MustClient("inv")
		ctx := context.Background()
		call := func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/stock/1", nil)
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		call() // warm the connection pool
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			call()
		}
	}

	b.Run("none", func(b *testing.B) { run(b) })
	b.Run("log-info-disabled", func(b *testing.B) {
		h := slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError})
		run(b, registry.WithLogger(slog.New(h)))
	})
	b.Run("metrics", func(b *testing.B) {
		m := metrics.New(prometheus.NewRegistry())
		run(b, registry.WithObserver(m))
	})
}

// BenchmarkObserve measures the metrics observer alone: one attempt and
// one call event of a known system.
func BenchmarkObserve(b *testing.B) {
	m := metrics.New(prometheus.NewRegistry())
	attempt := observe.AttemptEvent{System: "inv", Method: "GET", Attempt: 1, Status: 200,
		Duration: time.Millisecond, Outcome: observe.OutcomeOK}
	call := observe.CallEvent{System: "inv", Method: "GET", Attempts: 1, Status: 200,
		Duration: time.Millisecond, Outcome: observe.OutcomeOK}
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveAttempt(attempt)
		m.ObserveCall(call)
	}
}
