package otel_test

import (
	"context"
	"testing"

	"github.com/outbound-go/outbound/outboundtest"
)

// routeEnv declares route get-stock (GET /v1/stock/{id}) on a system
// whose BASE_URL has the path /v1.
func routeEnv(base string) map[string]string {
	return env(base+"/v1", map[string]string{"ROUTES": "get-stock", "ROUTE_GET_STOCK_MATCH": "GET /v1/stock/{id}"})
}

// TestDeclaredRouteLabelsSpansAndMetrics checks a call on a declared
// route: its spans are named by the route's template and carry
// outbound.route and url.template; http.client.request.duration,
// outbound.calls and outbound.call.duration carry outbound.route; a call
// off every route carries none.
func TestDeclaredRouteLabelsSpansAndMetrics(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	r := newRig(t, routeEnv(up.URL))
	for _, path := range []string{"/stock/42", "/stock/43", "/health"} {
		if status, err := r.get(t, context.Background(), "inventory", path, ""); err != nil || status != 200 {
			t.Fatalf("call %s: %d, %v", path, status, err)
		}
	}

	calls, attempts := r.callSpans(t)
	if len(calls) != 3 || len(attempts) != 3 {
		t.Fatalf("%d call spans and %d attempt spans, want 3 and 3", len(calls), len(attempts))
	}
	for i, s := range append(calls[:2:2], attempts[:2]...) {
		attrs := spanAttrs(s)
		if s.Name() != "GET /v1/stock/{id}" || attrs["outbound.route"] != "get-stock" || attrs["url.template"] != "/v1/stock/{id}" {
			t.Errorf("span %d on the route: %q %v, want the route's name and template", i, s.Name(), attrs)
		}
	}
	for _, s := range []interface {
		Name() string
	}{calls[2], attempts[2]} {
		if s.Name() != "GET" {
			t.Errorf("span off every route named %q, want GET", s.Name())
		}
	}
	for _, s := range []map[string]string{spanAttrs(calls[2]), spanAttrs(attempts[2])} {
		if _, ok := s["outbound.route"]; ok {
			t.Errorf("span off every route has outbound.route: %v", s)
		}
	}

	got := r.collect(t)
	on := map[string]string{"outbound.route": "get-stock"}
	for _, name := range []string{"http.client.request.duration", "outbound.call.duration"} {
		if v := value(t, got, name, on); v != 2 {
			t.Errorf("%s on the route: %v records, want 2", name, v)
		}
	}
	if v := value(t, got, "outbound.calls", map[string]string{"outbound.route": "get-stock", "outbound.outcome": "ok"}); v != 2 {
		t.Errorf("outbound.calls on the route: %v, want 2", v)
	}
	if v := value(t, got, "http.client.request.duration", map[string]string{"url.template": "/v1/stock/{id}"}); v != 2 {
		t.Errorf("url.template of the route's requests: %v records, want 2", v)
	}
	for _, name := range []string{"http.client.request.duration", "outbound.calls"} {
		if n := len(got[name]); n != 2 {
			t.Errorf("%s: %d series, want 2 (on the route and off it): %v", name, n, got[name])
		}
	}
}

// TestRouteRefusedByItsOwnBreakerIsLabelled checks that a call refused
// by its route's own breaker names the route in outbound.calls and on
// its call span.
func TestRouteRefusedByItsOwnBreakerIsLabelled(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: 500})
	e := routeEnv(up.URL)
	e["INVENTORY_ROUTE_GET_STOCK_BREAKER"] = "own"
	for k, v := range openBreakerEnv {
		e["INVENTORY_"+k] = v
	}
	r := newRig(t, e)
	if status, err := r.get(t, context.Background(), "inventory", "/stock/42", ""); err != nil || status != 500 {
		t.Fatalf("first call: %d, %v; want the 500 that opens the route's breaker", status, err)
	}
	if _, err := r.get(t, context.Background(), "inventory", "/stock/42", ""); err == nil {
		t.Fatal("second call: no error, want the route's breaker's refusal")
	}
	got := r.collect(t)
	if v := value(t, got, "outbound.calls", map[string]string{"outbound.route": "get-stock", "outbound.outcome": "breaker_open"}); v != 1 {
		t.Errorf("outbound.calls{get-stock, breaker_open} = %v, want 1", v)
	}
	calls, _ := r.callSpans(t)
	if len(calls) != 2 {
		t.Fatalf("%d call spans, want 2", len(calls))
	}
	if got := spanAttrs(calls[1])["outbound.route"]; got != "get-stock" {
		t.Errorf("refused call's span has outbound.route %q, want get-stock", got)
	}
}
