package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exported is what the test reads of a span the stdout exporter wrote.
type exported struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	SpanKind    int // 1 internal, 2 server, 3 client
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
	Status struct{ Code string }
}

func (s exported) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			b, _ := json.Marshal(a.Value.Value)
			return strings.Trim(string(b), `"`)
		}
	}
	return ""
}

// TestRunTracesTheCallAndEachAttempt runs the demo against its flaky
// upstream: the OpenTelemetry SDK exports the two attempts (the 503, an
// error, then the retry with its resend count), the call around them and
// the inbound request's span around it, all of one trace; the upstream
// saw the retry's span in its traceparent; and no secret of BASE_URL
// reached a span.
func TestRunTracesTheCallAndEachAttempt(t *testing.T) {
	srv := flakyUpstream()
	defer srv.Close()
	t.Setenv("INVENTORY_BASE_URL", "http://user:pw@"+strings.TrimPrefix(srv.URL, "http://")+"?token=s3cr3t")
	t.Setenv("INVENTORY_BACKOFF_BASE", "1ms")
	var out bytes.Buffer
	body, err := run(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	var spans []exported
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	for dec.More() {
		var s exported
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		spans = append(spans, s)
	}
	if len(spans) != 4 {
		t.Fatalf("%d spans exported, want 4 (two attempts, the call, the inbound request):\n%s", len(spans), out.String())
	}
	first, retry, call, inbound := spans[0], spans[1], spans[2], spans[3]
	if first.SpanKind != 3 || retry.SpanKind != 3 || call.SpanKind != 1 || inbound.Name != "GET /books/{isbn}" {
		t.Errorf("spans %q/%d, %q/%d, %q/%d, %q: want two client attempts, the internal call, the inbound request",
			first.Name, first.SpanKind, retry.Name, retry.SpanKind, call.Name, call.SpanKind, inbound.Name)
	}
	for _, s := range spans {
		if s.SpanContext.TraceID != inbound.SpanContext.TraceID {
			t.Errorf("span %q is in trace %s, want %s", s.Name, s.SpanContext.TraceID, inbound.SpanContext.TraceID)
		}
	}
	if first.Parent.SpanID != call.SpanContext.SpanID || retry.Parent.SpanID != call.SpanContext.SpanID ||
		call.Parent.SpanID != inbound.SpanContext.SpanID {
		t.Error("want the attempts children of the call, the call a child of the inbound request")
	}
	if first.attr("http.response.status_code") != "503" || first.Status.Code != "Error" || first.attr("http.request.resend_count") != "" {
		t.Errorf("first attempt: status %s (%s), resend_count %q; want 503, an error, none",
			first.attr("http.response.status_code"), first.Status.Code, first.attr("http.request.resend_count"))
	}
	if retry.attr("http.response.status_code") != "200" || retry.attr("http.request.resend_count") != "1" {
		t.Errorf("retry: status %s, resend_count %s; want 200, 1", retry.attr("http.response.status_code"), retry.attr("http.request.resend_count"))
	}
	if call.attr("outbound.system") != "inventory" || call.attr("outbound.attempts") != "2" {
		t.Errorf("call: system %q, attempts %q", call.attr("outbound.system"), call.attr("outbound.attempts"))
	}
	want := "00-" + retry.SpanContext.TraceID + "-" + retry.SpanContext.SpanID + "-01"
	if !strings.Contains(body, want) {
		t.Errorf("upstream answered %s, want it to have seen traceparent %s", body, want)
	}
	for _, secret := range []string{"user:pw", "s3cr3t"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("the spans contain %q", secret)
		}
	}
}
