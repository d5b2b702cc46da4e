package otel_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/outbound-go/outbound/outboundtest"
)

// redirector answers every request with a 302 to the URL last stored in
// its target.
type redirector struct{ target atomic.Pointer[string] }

func (d *redirector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, *d.target.Load(), http.StatusFound)
}

// TestRedirectHopsElsewhereAreOneServer checks that the upstream cannot
// set the cardinality of http.client.request.duration: with
// FOLLOW_REDIRECTS=any, calls redirected each to a listener on a port of
// its own are a fixed handful of series (BASE_URL's 302, and one
// server.address for every hop elsewhere), and another system's call
// afterwards has a series of its own, not the SDK's overflow.
func TestRedirectHopsElsewhereAreOneServer(t *testing.T) {
	t.Parallel()
	const calls = 2100
	d := &redirector{}
	up := outboundtest.NewUpstream(t, d)
	other := outboundtest.NewUpstream(t, outboundtest.Healthy())
	r := newRig(t, map[string]string{"OUTBOUND_SYSTEMS": "inventory,billing",
		"INVENTORY_BASE_URL": up.URL, "INVENTORY_FOLLOW_REDIRECTS": "any", "BILLING_BASE_URL": other.URL})

	ports := map[string]bool{}
	for range calls {
		hop := httptest.NewServer(outboundtest.Healthy())
		_, port, _ := net.SplitHostPort(hop.Listener.Addr().String())
		ports[port] = true
		target := hop.URL + "/landing"
		d.target.Store(&target)
		status, err := r.get(t, context.Background(), "inventory", "/stock/42", "")
		hop.Close()
		if err != nil || status != 200 {
			t.Fatalf("call redirected to %s: %d, %v", target, status, err)
		}
	}
	if status, err := r.get(t, context.Background(), "billing", "/", ""); err != nil || status != 200 {
		t.Fatalf("billing: %d, %v", status, err)
	}

	all := r.collect(t)
	got := all["http.client.request.duration"]
	t.Logf("%d calls redirected to %d ports: %d series of http.client.request.duration", calls, len(ports), len(got))
	host, port, _ := net.SplitHostPort(up.Addr())
	want := []map[string]string{
		{"outbound.system": "inventory", "server.address": host, "server.port": port, "http.response.status_code": "302"},
		{"outbound.system": "inventory", "server.address": "_OTHER", "http.response.status_code": "200"},
		{"outbound.system": "billing", "http.response.status_code": "200"},
	}
	for _, w := range want {
		var match []point
		for _, p := range got {
			if includes(p.attrs, w) {
				match = append(match, p)
			}
		}
		switch {
		case len(match) != 1:
			t.Errorf("%d series with %v, want 1", len(match), w)
		case w["outbound.system"] == "inventory" && match[0].value != calls:
			t.Errorf("series %v: %v records, want %d", w, match[0].value, calls)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d series, want %d", len(got), len(want))
	}
	if n := len(all["http.client.active_requests"]); n != 3 {
		t.Errorf("http.client.active_requests: %d series, want 3: %v", n, all["http.client.active_requests"])
	}
	for _, p := range got {
		if p.attrs["server.address"] == "_OTHER" && p.attrs["server.port"] != "" {
			t.Errorf("a hop elsewhere has server.port %s, want none", p.attrs["server.port"])
		}
	}
}

// madeUpStatus answers with a status no registry of statuses has.
type madeUpStatus int

func (s madeUpStatus) ServeHTTP(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(s)) }

// TestStatusOutsideTheRangeIsOneSeries checks that statuses an upstream
// makes up (below 100 or above 599) add no series of their own: each is
// recorded without http.response.status_code, with error.type _OTHER.
func TestStatusOutsideTheRangeIsOneSeries(t *testing.T) {
	t.Parallel()
	var status atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		madeUpStatus(status.Load()).ServeHTTP(w, r)
	}))
	r := newRig(t, env(up.URL, nil))
	for _, code := range []int{600, 799, 999, 600} {
		status.Store(int64(code))
		if got, err := r.get(t, context.Background(), "inventory", "/", ""); err != nil || got != code {
			t.Fatalf("call answered %d: %d, %v", code, got, err)
		}
	}
	got := r.collect(t)["http.client.request.duration"]
	if len(got) != 1 {
		t.Fatalf("%d series for 4 made-up statuses, want 1: %v", len(got), got)
	}
	if p := got[0]; p.value != 4 || p.attrs["http.response.status_code"] != "" || p.attrs["error.type"] != "_OTHER" {
		t.Errorf("series %v of %v records, want 4 records without a status and with error.type _OTHER", p, p.value)
	}
}
