package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

func main() {
	if err := demo(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func demo() error {
	logger := slog.New(slog.NewTextHandler(os.Stdout, nil))
	if os.Getenv("INVENTORY_BASE_URL") == "" {
		// No upstream given: serve a local one that fails once.
		srv := flakyUpstream()
		defer srv.Close()
		_ = os.Setenv("INVENTORY_BASE_URL", srv.URL)
		_ = os.Setenv("INVENTORY_BACKOFF_BASE", "20ms")
	}
	return run(context.Background(), logger)
}

// run builds the registry with the tracing wrapper and makes one call
// under a span of its own, as an inbound request handler would.
func run(ctx context.Context, logger *slog.Logger) error {
	reg, err := newRegistry(logger)
	if err != nil {
		return err
	}
	defer reg.Close()

	// The inbound request's span; with OpenTelemetry this comes from
	// the server middleware.
	ctx = ContextWithSpan(ctx, Span{TraceID: newID(16), SpanID: newID(8)})

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/stock/42", nil)
	if err != nil {
		return err
	}
	resp, err := reg.MustClient("inventory").Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	logger.Info("call done", "status", resp.StatusCode, "body", string(body))
	return nil
}

// newRegistry wraps each system's transport with the tracing
// RoundTripper. With OpenTelemetry
// (go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp) the
// option is one line:
//
//	registry.WithTransportWrapper(func(system string, rt http.RoundTripper) http.RoundTripper {
//		return otelhttp.NewTransport(rt, otelhttp.WithSpanNameFormatter(
//			func(_ string, r *http.Request) string { return system + " " + r.Method }))
//	})
func newRegistry(logger *slog.Logger) (*registry.Registry, error) {
	return registry.FromEnvWith([]config.System{{Name: "inventory"}},
		registry.WithTransportWrapper(func(system string, rt http.RoundTripper) http.RoundTripper {
			return &TracingTransport{System: system, Next: rt, Logger: logger}
		}),
	)
}

// Span identifies a span: the trace it belongs to and its own id, as in
// W3C Trace Context.
type Span struct {
	TraceID string // 32 hex digits
	SpanID  string // 16 hex digits
}

type spanKey struct{}

// ContextWithSpan returns ctx carrying s as the current span.
func ContextWithSpan(ctx context.Context, s Span) context.Context {
	return context.WithValue(ctx, spanKey{}, s)
}

// SpanFromContext returns the current span of ctx, if any.
func SpanFromContext(ctx context.Context) (Span, bool) {
	s, ok := ctx.Value(spanKey{}).(Span)
	return s, ok
}

// TracingTransport records one span per attempt: a child of the span in
// the request's context (or the root of a new trace), announced upstream
// in the traceparent header, logged when the response headers (or the
// error) arrive. URLs are logged as host and path only: no userinfo, no
// query.
type TracingTransport struct {
	System string
	Next   http.RoundTripper
	Logger *slog.Logger
}

// RoundTrip implements http.RoundTripper. It never modifies req: the
// header goes on a clone.
func (t *TracingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	parent, hasParent := SpanFromContext(req.Context())
	span := Span{TraceID: parent.TraceID, SpanID: newID(8)}
	if !hasParent {
		span.TraceID = newID(16)
	}
	out := req.Clone(req.Context())
	out.Header.Set("Traceparent", "00-"+span.TraceID+"-"+span.SpanID+"-01")

	start := time.Now()
	resp, err := t.Next.RoundTrip(out)
	attrs := []slog.Attr{
		slog.String("trace_id", span.TraceID),
		slog.String("span_id", span.SpanID),
		slog.String("parent_id", parent.SpanID),
		slog.String("name", t.System+" "+req.Method),
		slog.String("system", t.System),
		slog.String("method", req.Method),
		slog.String("host", req.URL.Host),
		slog.String("path", req.URL.Path),
		slog.Time("start", start),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
	}
	level := slog.LevelInfo
	switch {
	case err != nil:
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", err.Error()))
	default:
		attrs = append(attrs, slog.Int("status", resp.StatusCode))
		if resp.StatusCode >= 500 {
			level = slog.LevelWarn
		}
	}
	t.Logger.LogAttrs(req.Context(), level, "span", attrs...)
	return resp, err
}

// newID returns n random bytes in hex.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// flakyUpstream answers 503 to its first request and 200 to the others,
// so the demo shows a retry as a second span of the same trace.
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
