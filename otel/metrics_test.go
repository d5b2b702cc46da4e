package otel_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// TestCallRecordsTheHTTPClientConventionsAndOutboundsOwn checks the
// metrics of one successful call: the names, the exact attribute set of
// http.client.request.duration, the call by outcome, and the gauges read
// from Status.
func TestCallRecordsTheHTTPClientConventionsAndOutboundsOwn(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	r := newRig(t, env(up.URL, map[string]string{"MAX_CONCURRENT": "8"}))

	if status, err := r.get(t, context.Background(), "inventory", "/stock/42", ""); err != nil || status != 200 {
		t.Fatalf("call: %d, %v", status, err)
	}
	got := r.collect(t)
	want := []string{"http.client.active_requests", "http.client.request.duration",
		"outbound.breaker.state", "outbound.bulkhead.capacity", "outbound.bulkhead.in_flight", "outbound.bulkhead.limit",
		"outbound.call.duration", "outbound.calls", "outbound.hedges.sent", "outbound.hedges.won", "outbound.retries"}
	if !slices.Equal(names(got), want) {
		t.Errorf("metrics %v\nwant    %v", names(got), want)
	}
	host, port, _ := net.SplitHostPort(up.Addr())
	req := got["http.client.request.duration"]
	wantAttrs := map[string]string{"http.request.method": "GET", "server.address": host, "server.port": port,
		"http.response.status_code": "200", "outbound.system": "inventory"}
	if len(req) != 1 || req[0].value != 1 || len(req[0].attrs) != len(wantAttrs) || !includes(req[0].attrs, wantAttrs) {
		t.Errorf("http.client.request.duration %v, want one record with exactly %v", req, wantAttrs)
	}
	if v := value(t, got, "http.client.active_requests", map[string]string{"server.address": host, "server.port": port}); v != 0 {
		t.Errorf("http.client.active_requests = %v after the call, want 0", v)
	}
	if v := value(t, got, "outbound.calls", map[string]string{"outbound.outcome": "ok", "outbound.system": "inventory"}); v != 1 {
		t.Errorf("outbound.calls{ok} = %v, want 1", v)
	}
	if v := value(t, got, "outbound.call.duration", map[string]string{"outbound.outcome": "ok"}); v != 1 {
		t.Errorf("outbound.call.duration{ok} has %v records, want 1", v)
	}
	for state, want := range map[string]float64{"closed": 1, "half-open": 0, "open": 0} {
		if v := value(t, got, "outbound.breaker.state", map[string]string{"outbound.breaker.state": state}); v != want {
			t.Errorf("outbound.breaker.state{%s} = %v, want %v", state, v, want)
		}
	}
	for name, want := range map[string]float64{"outbound.bulkhead.capacity": 8, "outbound.bulkhead.limit": 8,
		"outbound.bulkhead.in_flight": 0, "outbound.retries": 0, "outbound.hedges.sent": 0} {
		if v := value(t, got, name, map[string]string{"outbound.system": "inventory"}); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

// TestEachAttemptIsARecordOfTheRequestDuration checks a call retried on
// 503: one record per attempt sent, the 503's with its status as
// error.type, and the retry counted.
func TestEachAttemptIsARecordOfTheRequestDuration(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.NewScript(outboundtest.Reply{Status: 503}, outboundtest.Healthy()))
	r := newRig(t, env(up.URL, map[string]string{"RETRIES": "2", "BACKOFF_BASE": "1ms", "BACKOFF_MAX": "2ms"}))

	if status, err := r.get(t, context.Background(), "inventory", "/", ""); err != nil || status != 200 {
		t.Fatalf("call: %d, %v", status, err)
	}
	got := r.collect(t)
	if v := value(t, got, "http.client.request.duration", map[string]string{"http.response.status_code": "503", "error.type": "503"}); v != 1 {
		t.Errorf("records of the 503: %v, want 1", v)
	}
	if v := value(t, got, "http.client.request.duration", map[string]string{"http.response.status_code": "200"}); v != 1 {
		t.Errorf("records of the 200: %v, want 1", v)
	}
	for _, p := range got["http.client.request.duration"] {
		if p.attrs["http.response.status_code"] == "200" && p.attrs["error.type"] != "" {
			t.Errorf("the 200 has error.type %q", p.attrs["error.type"])
		}
	}
	if v := value(t, got, "outbound.retries", nil); v != 1 {
		t.Errorf("outbound.retries = %v, want 1", v)
	}
	if v := value(t, got, "outbound.calls", map[string]string{"outbound.outcome": "ok"}); v != 1 {
		t.Errorf("outbound.calls{ok} = %v, want 1", v)
	}
}

// TestRefusalIsACallOutcomeAndNoRequest checks a call refused by the open
// breaker: counted in outbound.calls as breaker_open, not a request sent
// (no record of http.client.request.duration, none of
// outbound.call.duration), and the breaker's transition and state.
func TestRefusalIsACallOutcomeAndNoRequest(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: 500})
	r := newRig(t, env(up.URL, openBreakerEnv))

	if status, err := r.get(t, context.Background(), "inventory", "/", ""); err != nil || status != 500 {
		t.Fatalf("first call: %d, %v; want the 500 that opens the breaker", status, err)
	}
	if _, err := r.get(t, context.Background(), "inventory", "/", ""); err == nil {
		t.Fatal("second call: no error, want the breaker's refusal")
	}
	got := r.collect(t)
	if v := value(t, got, "outbound.calls", map[string]string{"outbound.outcome": "breaker_open"}); v != 1 {
		t.Errorf("outbound.calls{breaker_open} = %v, want 1", v)
	}
	if v := value(t, got, "http.client.request.duration", nil); v != 1 {
		t.Errorf("http.client.request.duration has %v records, want the 500's only", v)
	}
	if v := value(t, got, "http.client.request.duration", map[string]string{"error.type": "500"}); v != 1 {
		t.Errorf("records of the 500: %v, want 1", v)
	}
	for _, p := range got["outbound.call.duration"] {
		if p.attrs["outbound.outcome"] == "breaker_open" {
			t.Errorf("the refused call has a duration: %v", p)
		}
	}
	if v := value(t, got, "outbound.breaker.transitions", map[string]string{"outbound.breaker.from": "closed", "outbound.breaker.to": "open"}); v != 1 {
		t.Errorf("outbound.breaker.transitions{closed->open} = %v, want 1", v)
	}
	if v := value(t, got, "outbound.breaker.state", map[string]string{"outbound.breaker.state": "open"}); v != 1 {
		t.Errorf("outbound.breaker.state{open} = %v, want 1", v)
	}
}

// TestRetryRefusedByTheBreakerIsNoRequest checks a call whose first
// attempt opens the breaker, so that its retry is refused: the attempt
// that was sent is the one record of http.client.request.duration (the
// refused retry sent nothing), and the call counts as sent and given up,
// not as a refusal.
func TestRetryRefusedByTheBreakerIsNoRequest(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, hangOr503())
	for _, tc := range refusedRetryCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, env(up.URL, breakerOpensOnTheFirstFailureEnv))
			_, _ = r.get(t, context.Background(), "inventory", tc.path, "")
			got := r.collect(t)
			if req := got["http.client.request.duration"]; len(req) != 1 || req[0].value != 1 || req[0].attrs["error.type"] != tc.errorType {
				t.Errorf("http.client.request.duration %v, want the one record of the attempt sent (error.type %s)", req, tc.errorType)
			}
			if v := value(t, got, "outbound.calls", nil); v != 1 {
				t.Errorf("outbound.calls has %v calls, want 1", v)
			}
			if v := value(t, got, "outbound.calls", map[string]string{"outbound.outcome": "gave_up"}); v != 1 {
				t.Errorf("outbound.calls{gave_up} = %v, want 1", v)
			}
		})
	}
}

// TestConnectErrorIsTheErrorTypeOfItsRequest checks that an attempt
// without a response has the registry's op as error.type and no status.
func TestConnectErrorIsTheErrorTypeOfItsRequest(t *testing.T) {
	t.Parallel()
	r := newRig(t, env(closedPortURL(t), map[string]string{"RETRIES": "0"}))

	if _, err := r.get(t, context.Background(), "inventory", "/", ""); err == nil {
		t.Fatal("call to a closed port: no error")
	}
	got := r.collect(t)
	req := got["http.client.request.duration"]
	if len(req) != 1 || req[0].attrs["error.type"] != "connect" {
		t.Fatalf("http.client.request.duration %v, want one record with error.type connect", req)
	}
	if s, ok := req[0].attrs["http.response.status_code"]; ok {
		t.Errorf("a request without a response has status %s", s)
	}
	if v := value(t, got, "outbound.calls", map[string]string{"outbound.outcome": "gave_up"}); v != 1 {
		t.Errorf("outbound.calls{gave_up} = %v, want 1", v)
	}
}

// TestPathsStayOutOfTheAttributes checks that the attribute sets stay
// bounded: three paths without a route are one series with no path in
// it; with a route, the route is url.template.
func TestPathsStayOutOfTheAttributes(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	r := newRig(t, env(up.URL, nil))

	for _, isbn := range []string{"1", "2", "3"} {
		if _, err := r.get(t, context.Background(), "inventory", "/stock/"+isbn, ""); err != nil {
			t.Fatal(err)
		}
	}
	got := r.collect(t)
	if req := got["http.client.request.duration"]; len(req) != 1 || req[0].value != 3 {
		t.Errorf("three paths without a route: %v, want one series of 3", req)
	}
	for name, points := range got {
		for _, p := range points {
			for k, v := range p.attrs {
				if strings.Contains(v, "/stock") || k == "url.template" || k == "url.path" || k == "url.full" {
					t.Errorf("%s has %s=%s", name, k, v)
				}
			}
		}
	}

	for _, isbn := range []string{"4", "5"} {
		if _, err := r.get(t, context.Background(), "inventory", "/stock/"+isbn, "/stock/{isbn}"); err != nil {
			t.Fatal(err)
		}
	}
	got = r.collect(t)
	if v := value(t, got, "http.client.request.duration", map[string]string{"url.template": "/stock/{isbn}"}); v != 2 {
		t.Errorf("calls with a route: %v records under url.template, want 2", v)
	}
	if n := len(got["http.client.request.duration"]); n != 2 {
		t.Errorf("%d series, want 2 (without and with the route): %v", n, got["http.client.request.duration"])
	}
}

// TestRequestsInFlightAreCountedUntilTheyEnd checks
// http.client.active_requests and outbound.bulkhead.in_flight while a
// request waits for its answer, and after.
func TestRequestsInFlightAreCountedUntilTheyEnd(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		close(arrived)
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	r := newRig(t, env(up.URL, nil))

	done := make(chan error, 1)
	go func() {
		_, err := r.get(t, context.Background(), "inventory", "/", "")
		done <- err
	}()
	<-arrived
	got := r.collect(t)
	if v := value(t, got, "http.client.active_requests", nil); v != 1 {
		t.Errorf("http.client.active_requests = %v while the request waits, want 1", v)
	}
	if v := value(t, got, "outbound.bulkhead.in_flight", nil); v != 1 {
		t.Errorf("outbound.bulkhead.in_flight = %v while the request waits, want 1", v)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got = r.collect(t)
	if v := value(t, got, "http.client.active_requests", nil); v != 0 {
		t.Errorf("http.client.active_requests = %v after the call, want 0", v)
	}
	if v := value(t, got, "outbound.bulkhead.in_flight", nil); v != 0 {
		t.Errorf("outbound.bulkhead.in_flight = %v after the body was closed, want 0", v)
	}
}

// TestInjectedFaultsAreNotTheUpstreamsRequests checks a drill: attempts
// that fault injection aborted count in outbound.injected.attempts, not
// in http.client.request.duration, and nothing reached the upstream.
func TestInjectedFaultsAreNotTheUpstreamsRequests(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	e := env(up.URL, map[string]string{"RETRIES": "0", "FAULT_ABORT_RATIO": "1"})
	e["OUTBOUND_FAULTS"] = "on"
	r := newRig(t, e)

	if status, err := r.get(t, context.Background(), "inventory", "/", ""); err != nil || status != 503 {
		t.Fatalf("call: %d, %v; want the injected 503", status, err)
	}
	got := r.collect(t)
	if up.Requests() != 0 {
		t.Errorf("the upstream got %d requests, want 0", up.Requests())
	}
	if req := got["http.client.request.duration"]; len(req) != 0 {
		t.Errorf("http.client.request.duration %v, want no record of an injected abort", req)
	}
	if v := value(t, got, "outbound.injected.attempts", map[string]string{"outbound.system": "inventory"}); v != 1 {
		t.Errorf("outbound.injected.attempts = %v, want 1", v)
	}
}

// TestUnknownMethodIsOther checks that a method the semantic conventions
// do not know is "_OTHER" in the metrics, so that the attribute stays
// bounded.
func TestUnknownMethodIsOther(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	r := newRig(t, env(up.URL, nil))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "PURGE", "/cache", nil)
	resp, err := r.reg.MustClient("inventory").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	got := r.collect(t)
	if v := value(t, got, "http.client.request.duration", map[string]string{"http.request.method": "_OTHER"}); v != 1 {
		t.Errorf("records under _OTHER: %v, want 1", v)
	}
	_, attempts := r.callSpans(t)
	if len(attempts) != 1 || attempts[0].Name() != "HTTP" || spanAttrs(attempts[0])["http.request.method_original"] != "PURGE" {
		t.Errorf("attempt spans %v: want one named HTTP with http.request.method_original PURGE", attempts)
	}
}

// TestRateLimitAndForcedBreakerAreRecorded checks the instruments of what
// a rate limit and an operator impose: the share, the refusals, and the
// forced state.
func TestRateLimitAndForcedBreakerAreRecorded(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	r := newRig(t, env(up.URL, map[string]string{"RATE_LIMIT": "1/h", "RATE_BURST": "1"}))
	for range 2 {
		_, _ = r.get(t, context.Background(), "inventory", "/", "")
	}
	if err := r.reg.MustClient("inventory").Force(observe.BreakerOpen, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := r.collect(t)
	if v := value(t, got, "outbound.rate.refused", nil); v != 1 {
		t.Errorf("outbound.rate.refused = %v, want 1", v)
	}
	if v := value(t, got, "outbound.rate.share", nil); v != 1.0/3600 {
		t.Errorf("outbound.rate.share = %v, want 1/3600", v)
	}
	if v := value(t, got, "outbound.breaker.forced", map[string]string{"outbound.breaker.state": "open"}); v != 1 {
		t.Errorf("outbound.breaker.forced{open} = %v, want 1", v)
	}
}
