package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)

// TestRunTracesEveryAttempt runs the demo against its flaky upstream:
// the 503 and the retry's 200 are two spans of one trace, children of
// the caller's span, and the upstream saw the second span's traceparent.
func TestRunTracesEveryAttempt(t *testing.T) {
	srv := flakyUpstream()
	defer srv.Close()
	t.Setenv("INVENTORY_BASE_URL", "http://user:pw@"+strings.TrimPrefix(srv.URL, "http://")+"?token=s3cr3t")
	t.Setenv("INVENTORY_BACKOFF_BASE", "1ms")
	var buf syncBuffer
	if err := run(context.Background(), slog.New(slog.NewJSONHandler(&buf, nil))); err != nil {
		t.Fatal(err)
	}
	recs := buf.records(t)
	if len(recs) != 3 || recs[0]["msg"] != "span" || recs[1]["msg"] != "span" || recs[2]["msg"] != "call done" {
		t.Fatalf("records %v: want two spans and the call", recs)
	}
	a, b := recs[0], recs[1]
	if a["status"] != float64(503) || b["status"] != float64(200) || a["level"] != "WARN" || b["level"] != "INFO" {
		t.Errorf("spans %v, %v: want a 503 (WARN) then a 200", a, b)
	}
	if a["trace_id"] != b["trace_id"] || a["parent_id"] != b["parent_id"] || a["span_id"] == b["span_id"] || a["parent_id"] == "" {
		t.Errorf("spans %v, %v: want two children of one parent in one trace", a, b)
	}
	if a["system"] != "inventory" || a["path"] != "/stock/42" || a["name"] != "inventory GET" {
		t.Errorf("span %v", a)
	}
	want := "00-" + b["trace_id"].(string) + "-" + b["span_id"].(string) + "-01"
	if body, _ := recs[2]["body"].(string); !strings.Contains(body, want) {
		t.Errorf("upstream saw %q, want traceparent %s", body, want)
	}
	out := buf.b.String()
	for _, secret := range []string{"user:pw", "s3cr3t"} {
		if strings.Contains(out, secret) {
			t.Errorf("the spans contain %q", secret)
		}
	}
}

// TestTracingTransportLeavesRequestAlone checks that the header goes on
// a clone, and that a request without a span starts a trace.
func TestTracingTransportLeavesRequestAlone(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Traceparent")
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	var buf syncBuffer
	tr := &TracingTransport{System: "inv", Next: srv.Client().Transport, Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if req.Header.Get("Traceparent") != "" {
		t.Error("RoundTrip modified the caller's request")
	}
	if !traceparentRE.MatchString(got) {
		t.Errorf("traceparent %q", got)
	}
	if r := buf.records(t)[0]; r["parent_id"] != "" || !strings.Contains(got, r["trace_id"].(string)) {
		t.Errorf("root span %v for traceparent %s", r, got)
	}
}
