package otel_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	outboundotel "github.com/outbound-go/outbound/otel"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// spanAttrs returns a span's attributes as strings.
func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// callSpans splits the spans the registry ended into calls (kind
// internal) and attempts (kind client), in the order they ended.
func (r *rig) callSpans(t *testing.T) (calls, attempts []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range r.spans.Ended() {
		if s.InstrumentationScope().Name != outboundotel.ScopeName {
			continue
		}
		switch s.SpanKind() {
		case trace.SpanKindInternal:
			calls = append(calls, s)
		case trace.SpanKindClient:
			attempts = append(attempts, s)
		default:
			t.Errorf("span %q of kind %v", s.Name(), s.SpanKind())
		}
	}
	return calls, attempts
}

// TestCallIsASpanWithAnAttemptSpanWhoseContextReachesTheUpstream checks
// a successful call: one call span, child of the caller's, one attempt
// span, child of the call's, with the semantic conventions' attributes,
// and the attempt's traceparent in the request the upstream received.
func TestCallIsASpanWithAnAttemptSpanWhoseContextReachesTheUpstream(t *testing.T) {
	t.Parallel()
	script := outboundtest.NewScript(outboundtest.Healthy())
	up := outboundtest.NewUpstream(t, script)
	r := newRig(t, env(up.URL, nil))

	ctx, caller := r.tp.Tracer("test").Start(context.Background(), "handler")
	status, err := r.get(t, ctx, "inventory", "/stock/42", "")
	caller.End()
	if err != nil || status != 200 {
		t.Fatalf("call: %d, %v", status, err)
	}
	calls, attempts := r.callSpans(t)
	if len(calls) != 1 || len(attempts) != 1 {
		t.Fatalf("%d call spans and %d attempt spans, want 1 and 1", len(calls), len(attempts))
	}
	c, a := calls[0], attempts[0]
	if c.Parent().SpanID() != caller.SpanContext().SpanID() || a.Parent().SpanID() != c.SpanContext().SpanID() {
		t.Errorf("parents: call's %v (caller %v), attempt's %v (call %v)", c.Parent().SpanID(), caller.SpanContext().SpanID(), a.Parent().SpanID(), c.SpanContext().SpanID())
	}
	if c.Name() != "GET" || a.Name() != "GET" {
		t.Errorf("names %q, %q; want GET, GET", c.Name(), a.Name())
	}
	host, port, _ := net.SplitHostPort(up.Addr())
	for k, v := range map[string]string{"http.request.method": "GET", "server.address": host, "server.port": port,
		"url.full": up.URL + "/stock/42", "http.response.status_code": "200", "network.protocol.version": "1.1",
		"outbound.system": "inventory"} {
		if got := spanAttrs(a)[k]; got != v {
			t.Errorf("attempt span %s = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"http.request.resend_count", "error.type", "url.template"} {
		if v, ok := spanAttrs(a)[k]; ok {
			t.Errorf("attempt span has %s=%s", k, v)
		}
	}
	for k, v := range map[string]string{"http.request.method": "GET", "outbound.system": "inventory",
		"http.response.status_code": "200", "outbound.attempts": "1", "server.address": host} {
		if got := spanAttrs(c)[k]; got != v {
			t.Errorf("call span %s = %q, want %q", k, got, v)
		}
	}
	if c.Status().Code != codes.Unset || a.Status().Code != codes.Unset {
		t.Errorf("statuses %v, %v; want unset", c.Status(), a.Status())
	}
	got := script.Received()[0].Header.Get("traceparent")
	want := "00-" + a.SpanContext().TraceID().String() + "-" + a.SpanContext().SpanID().String() + "-01"
	if got != want {
		t.Errorf("upstream got traceparent %q, want the attempt's %q", got, want)
	}
}

// TestRetriesAreAttemptSpansWithTheirResendCount checks a call retried
// on 503 then answered 200: two attempt spans under one call span, the
// 503 an error with its status as error.type, the retry with
// http.request.resend_count 1, each with its own traceparent upstream.
func TestRetriesAreAttemptSpansWithTheirResendCount(t *testing.T) {
	t.Parallel()
	script := outboundtest.NewScript(outboundtest.Reply{Status: 503}, outboundtest.Healthy())
	up := outboundtest.NewUpstream(t, script)
	r := newRig(t, env(up.URL, map[string]string{"RETRIES": "2", "BACKOFF_BASE": "1ms", "BACKOFF_MAX": "2ms"}))

	if status, err := r.get(t, context.Background(), "inventory", "/stock/42", ""); err != nil || status != 200 {
		t.Fatalf("call: %d, %v", status, err)
	}
	calls, attempts := r.callSpans(t)
	if len(calls) != 1 || len(attempts) != 2 {
		t.Fatalf("%d call spans and %d attempt spans, want 1 and 2", len(calls), len(attempts))
	}
	first, retry := spanAttrs(attempts[0]), spanAttrs(attempts[1])
	if first["http.response.status_code"] != "503" || first["error.type"] != "503" || attempts[0].Status().Code != codes.Error {
		t.Errorf("first attempt %v (%v): want 503, error.type 503, an error", first, attempts[0].Status())
	}
	if _, ok := first["http.request.resend_count"]; ok {
		t.Errorf("first attempt has a resend count: %v", first)
	}
	if retry["http.request.resend_count"] != "1" || retry["http.response.status_code"] != "200" {
		t.Errorf("retry %v: want resend_count 1, status 200", retry)
	}
	for _, a := range attempts {
		if a.Parent().SpanID() != calls[0].SpanContext().SpanID() {
			t.Errorf("attempt %v is not a child of the call", a.SpanContext().SpanID())
		}
	}
	if got := spanAttrs(calls[0])["outbound.attempts"]; got != "2" {
		t.Errorf("call span outbound.attempts = %s, want 2", got)
	}
	got := script.Received()
	if len(got) != 2 || got[0].Header.Get("traceparent") == got[1].Header.Get("traceparent") ||
		!strings.Contains(got[1].Header.Get("traceparent"), attempts[1].SpanContext().SpanID().String()) {
		t.Errorf("traceparents upstream %q, %q: want one per attempt, the retry's its span's",
			got[0].Header.Get("traceparent"), got[1].Header.Get("traceparent"))
	}
}

// openBreakerEnv opens the breaker on the first failure and keeps it open
// for the test.
var openBreakerEnv = map[string]string{"RETRIES": "0", "BREAKER_MIN_REQUESTS": "1",
	"BREAKER_FAILURE_RATIO": "0.5", "BREAKER_OPEN_TIMEOUT": "10m"}

// TestRefusalIsAnEventOfTheCallSpanWithoutAttempt checks a call the open
// breaker refuses: its call span has the refusal as an event and the op
// as error.type, and no attempt span, and nothing reached the upstream.
func TestRefusalIsAnEventOfTheCallSpanWithoutAttempt(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: 500})
	r := newRig(t, env(up.URL, openBreakerEnv))

	if status, err := r.get(t, context.Background(), "inventory", "/", ""); err != nil || status != 500 {
		t.Fatalf("first call: %d, %v; want the 500 that opens the breaker", status, err)
	}
	r.spans.Reset()
	_, err := r.get(t, context.Background(), "inventory", "/", "")
	if !errors.Is(err, registry.ErrCircuitOpen) {
		t.Fatalf("second call: %v, want ErrCircuitOpen", err)
	}
	if up.Requests() != 1 {
		t.Errorf("the upstream got %d requests, want 1", up.Requests())
	}
	calls, attempts := r.callSpans(t)
	if len(calls) != 1 || len(attempts) != 0 {
		t.Fatalf("%d call spans and %d attempt spans, want 1 and 0", len(calls), len(attempts))
	}
	c := calls[0]
	if got := spanAttrs(c); got["error.type"] != "breaker open" || got["outbound.attempts"] != "0" || c.Status().Code != codes.Error {
		t.Errorf("call span %v (%v): want error.type breaker, 0 attempts, an error", got, c.Status())
	}
	ev := c.Events()
	if len(ev) != 1 || ev[0].Name != outboundotel.RefusalEvent {
		t.Fatalf("events %v, want one %s", ev, outboundotel.RefusalEvent)
	}
	attrs := map[string]string{}
	for _, kv := range ev[0].Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["outbound.refusal.reason"] != "breaker-open" || attrs["outbound.outcome"] != "breaker_open" {
		t.Errorf("refusal event %v", attrs)
	}
}

// TestRetryRefusedByTheBreakerIsNoAttemptSpan checks a call whose first
// attempt opens the breaker, so that its retry is refused: the attempt
// that was sent is the call's one attempt span and counts
// (outbound.attempts 1), the refused retry is no span, and the call ends
// on what that attempt met (the 503, a read timeout), not as a refusal.
func TestRetryRefusedByTheBreakerIsNoAttemptSpan(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, hangOr503())
	for _, tc := range refusedRetryCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, env(up.URL, breakerOpensOnTheFirstFailureEnv))
			status, err := r.get(t, context.Background(), "inventory", tc.path, "")
			var re *registry.Error
			switch {
			case tc.path == "/down" && (err != nil || status != 503):
				t.Fatalf("call: %d, %v; want the 503 the attempt got", status, err)
			case tc.path == "/hang" && (!errors.As(err, &re) || re.Op.String() != "read timeout" || re.Attempts != 1):
				t.Fatalf("call: %v; want the read timeout of the one attempt sent", err)
			}
			calls, attempts := r.callSpans(t)
			if len(calls) != 1 || len(attempts) != 1 {
				t.Fatalf("%d call spans and %d attempt spans, want 1 and 1", len(calls), len(attempts))
			}
			if ev := calls[0].Events(); len(ev) != 0 {
				t.Errorf("call span events %v, want none: the call sent an attempt, it was not refused", ev)
			}
			a := spanAttrs(calls[0])
			if a["outbound.attempts"] != "1" || a["error.type"] != tc.errorType {
				t.Errorf("call span outbound.attempts = %s, error.type = %q; want 1 and %q", a["outbound.attempts"], a["error.type"], tc.errorType)
			}
		})
	}
}

// breakerOpensOnTheFirstFailureEnv allows two retries and opens the
// breaker on the first failed attempt, for an hour.
var breakerOpensOnTheFirstFailureEnv = map[string]string{"RETRIES": "2", "BACKOFF_BASE": "1ms", "BACKOFF_MAX": "2ms",
	"BREAKER_MIN_REQUESTS": "1", "BREAKER_FAILURE_RATIO": "0.5", "BREAKER_OPEN_TIMEOUT": "1h",
	"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "100ms", "READ_TIMEOUT": "200ms"}

// refusedRetryCases are the failures of a first attempt that opens the
// breaker, so that the retry is refused: the path of hangOr503 that
// meets each, and the error.type the attempt ends with.
var refusedRetryCases = []struct{ name, path, errorType string }{
	{"503", "/down", "503"},
	{"read timeout", "/hang", "read timeout"},
}

// hangOr503 answers /hang after the client has gone, and anything else
// with a 503.
func hangOr503() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
}

// TestConnectErrorNamesItsOp checks a call whose connect fails: the call
// span's error.type is the registry's op, and the attempt span is an
// error with an error.type.
func TestConnectErrorNamesItsOp(t *testing.T) {
	t.Parallel()
	r := newRig(t, env(closedPortURL(t), map[string]string{"RETRIES": "0"}))

	_, err := r.get(t, context.Background(), "inventory", "/", "")
	var re *registry.Error
	if !errors.As(err, &re) || re.Op.String() != "connect" {
		t.Fatalf("call: %v, want a connect error", err)
	}
	calls, attempts := r.callSpans(t)
	if len(calls) != 1 || len(attempts) != 1 {
		t.Fatalf("%d call spans and %d attempt spans, want 1 and 1", len(calls), len(attempts))
	}
	if got := spanAttrs(calls[0])["error.type"]; got != "connect" || calls[0].Status().Code != codes.Error {
		t.Errorf("call span error.type %q (%v), want connect and an error", got, calls[0].Status())
	}
	a := spanAttrs(attempts[0])
	if a["error.type"] != "connect" || attempts[0].Status().Code != codes.Error {
		t.Errorf("attempt span %v (%v): want error.type connect, the op the metric says, and an error", a, attempts[0].Status())
	}
	if _, ok := a["http.response.status_code"]; ok {
		t.Errorf("attempt span without a response has a status: %v", a)
	}
}

// closedPortURL returns the URL of a loopback port nothing listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

// TestHedgeIsAnAttemptSpanOfItsCall checks hedging: the first request
// to arrive hangs, the next answers; both copies are attempt spans of
// the one call, the later one with http.request.resend_count 1, and the
// hedge metrics count the copy sent and whether it won.
func TestHedgeIsAnAttemptSpanOfItsCall(t *testing.T) {
	t.Parallel()
	script := outboundtest.NewScript(
		outboundtest.Reply{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			<-req.Context().Done() // until the other copy wins and the registry cancels this one
		})},
		outboundtest.Healthy())
	up := outboundtest.NewUpstream(t, script)
	r := newRig(t, env(up.URL, map[string]string{"HEDGE_DELAY": "20ms", "HEDGE_MAX": "1", "MAX_CONCURRENT": "4"}))

	if status, err := r.get(t, context.Background(), "inventory", "/", ""); err != nil || status != 200 {
		t.Fatalf("call: %d, %v", status, err)
	}
	calls, attempts := r.callSpans(t)
	if len(calls) != 1 || len(attempts) != 2 {
		t.Fatalf("%d call spans and %d attempt spans, want 1 and 2", len(calls), len(attempts))
	}
	resends := map[string]bool{}
	winner := ""
	for _, a := range attempts {
		attrs := spanAttrs(a)
		resends[attrs["http.request.resend_count"]] = true
		if attrs["http.response.status_code"] == "200" {
			winner = attrs["http.request.resend_count"]
		}
		if a.Parent().SpanID() != calls[0].SpanContext().SpanID() {
			t.Errorf("attempt %v is not a child of the call", a.SpanContext().SpanID())
		}
	}
	if !resends[""] || !resends["1"] {
		t.Errorf("resend counts %v, want none on one copy and 1 on the other", resends)
	}
	got := r.collect(t)
	if v := value(t, got, "outbound.hedges.sent", nil); v != 1 {
		t.Errorf("outbound.hedges.sent = %v, want 1", v)
	}
	// The hedge is the copy sent second (resend_count 1); it won when
	// its answer is the 200. It is, unless the first copy reached the
	// upstream after the hedge did.
	wantWon := 0.0
	if winner == "1" {
		wantWon = 1
	}
	if v := value(t, got, "outbound.hedges.won", nil); v != wantWon {
		t.Errorf("outbound.hedges.won = %v, want %v (the 200 came to the copy with resend_count %q)", v, wantWon, winner)
	}
}

// TestCallersHeadersAreNeverWritten checks that the trace context goes
// on a copy: the caller's header map is the same after the call, through
// Do and through HTTPClient, and the upstream still gets a traceparent.
// Without X-Time-Budget the registry hands the caller's own header map
// to the transport.
func TestCallersHeadersAreNeverWritten(t *testing.T) {
	t.Parallel()
	script := outboundtest.NewScript(outboundtest.Healthy())
	up := outboundtest.NewUpstream(t, script)
	r := newRig(t, env(up.URL, map[string]string{"OMIT_TIME_BUDGET": "true"}))
	c := r.reg.MustClient("inventory")

	for name, do := range map[string]func(*http.Request) (*http.Response, error){
		"Do":         c.Do,
		"HTTPClient": c.HTTPClient().Do,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/x", nil)
		req.Header.Set("X-Caller", "1")
		resp, err := do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", name, err)
		}
		_ = resp.Body.Close()
		cancel()
		if len(req.Header) != 1 || req.Header.Get("traceparent") != "" {
			t.Errorf("%s: the caller's headers became %v", name, req.Header)
		}
	}
	for _, got := range script.Received() {
		if got.Header.Get("traceparent") == "" || got.Header.Get("X-Caller") != "1" {
			t.Errorf("upstream got headers %v: want the caller's and a traceparent", got.Header)
		}
	}
}

// TestCallersRouteNamesTheSpans checks that a call given a route has it
// in its spans' names and url.template, and that no attribute but the
// attempt's url.full (the URL sent) carries the raw path.
func TestCallersRouteNamesTheSpans(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	r := newRig(t, env(up.URL, nil))
	if _, err := r.get(t, context.Background(), "inventory", "/stock/978-0-secret", "/stock/{isbn}"); err != nil {
		t.Fatal(err)
	}
	calls, attempts := r.callSpans(t)
	if len(calls) != 1 || len(attempts) != 1 {
		t.Fatalf("%d call spans and %d attempt spans, want 1 and 1", len(calls), len(attempts))
	}
	for _, s := range append(calls, attempts...) {
		if s.Name() != "GET /stock/{isbn}" || spanAttrs(s)["url.template"] != "/stock/{isbn}" {
			t.Errorf("span %q %v, want the route in its name and url.template", s.Name(), spanAttrs(s))
		}
		for k, v := range spanAttrs(s) {
			if strings.Contains(v, "secret") && k != "url.full" {
				t.Errorf("span %q: %s = %q shows the raw path", s.Name(), k, v)
			}
		}
	}
}
