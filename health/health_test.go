package health_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/health"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newRegistry declares inv and pay against one loopback upstream that
// answers 503 on /down and 200 elsewhere; each breaker opens after 5
// failed calls (no retries) and stays open.
func newRegistry(t *testing.T) (*registry.Registry, *outboundtest.Upstream) {
	t.Helper()
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Setenv("OUTBOUND_SYSTEMS", "inv,pay")
	for _, p := range []string{"INV", "PAY"} {
		t.Setenv(p+"_BASE_URL", srv.URL)
		t.Setenv(p+"_RETRIES", "0")
		t.Setenv(p+"_BREAKER_MIN_REQUESTS", "5")
		t.Setenv(p+"_BREAKER_OPEN_TIMEOUT", "1h")
	}
	t.Setenv("PAY_MAX_CONCURRENT", "8")
	r, err := registry.FromEnvWith(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, srv
}

// storm sends 5xx until the system's breaker opens.
func storm(t *testing.T, c *registry.Client) {
	t.Helper()
	for i := 0; i < 50 && c.Status().Breaker != observe.BreakerOpen; i++ {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "/down", nil)
		if resp, err := c.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	if s := c.Status().Breaker; s != observe.BreakerOpen {
		t.Fatalf("%s breaker %s after the storm, want open", c.Name(), s)
	}
}

// probe sends method to h and decodes the report.
func probe(t *testing.T, h http.Handler, method string) (int, health.Report, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, "/readyz", nil))
	var rep health.Report
	if method == http.MethodGet && rec.Code != http.StatusMethodNotAllowed {
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatalf("body %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, rep, rec.Header()
}

func TestReadinessReportsEverySystem(t *testing.T) {
	r, _ := newRegistry(t)
	code, rep, h := probe(t, health.Readiness(r, health.AlwaysReady), http.MethodGet)
	if code != http.StatusOK || !rep.Ready || len(rep.Reasons) != 0 {
		t.Fatalf("fresh registry: %d %+v, want 200 ready", code, rep)
	}
	want := []health.System{
		{Name: "inv", Breaker: observe.BreakerClosed, Scope: "local", InFlight: 0, Capacity: 32},
		{Name: "pay", Breaker: observe.BreakerClosed, Scope: "local", InFlight: 0, Capacity: 8},
	}
	if !reflect.DeepEqual(rep.Systems, want) {
		t.Errorf("systems %+v, want %+v", rep.Systems, want)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := h.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
}

// TestReadinessJSONFields pins the wire names probes and dashboards read.
func TestReadinessJSONFields(t *testing.T) {
	r, _ := newRegistry(t)
	rec := httptest.NewRecorder()
	health.Readiness(r, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var raw map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if raw["ready"] != true {
		t.Errorf("nil policy: ready = %v, want true", raw["ready"])
	}
	if _, ok := raw["reasons"].([]any); !ok {
		t.Errorf("reasons is %T, want an array (empty, never null)", raw["reasons"])
	}
	sys := raw["systems"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "breaker", "scope", "in_flight", "capacity"} {
		if _, ok := sys[k]; !ok {
			t.Errorf("system without %q: %v", k, sys)
		}
	}
}

func TestCriticalSystems(t *testing.T) {
	r, srv := newRegistry(t)
	critical := health.Readiness(r, health.CriticalSystems("pay"))
	always := health.Readiness(r, health.AlwaysReady)

	// A non-critical system's open breaker keeps the service ready.
	storm(t, r.MustClient("inv"))
	if code, rep, _ := probe(t, critical, http.MethodGet); code != http.StatusOK || !rep.Ready {
		t.Fatalf("inv open, pay critical: %d %+v, want 200", code, rep)
	}

	// The critical system's open breaker makes it not ready.
	storm(t, r.MustClient("pay"))
	before := srv.Requests()
	code, rep, _ := probe(t, critical, http.MethodGet)
	if code != http.StatusServiceUnavailable || rep.Ready {
		t.Fatalf("pay open: %d %+v, want 503 not ready", code, rep)
	}
	if want := []string{"pay: circuit breaker open"}; !slices.Equal(rep.Reasons, want) {
		t.Errorf("reasons %q, want %q", rep.Reasons, want)
	}
	if rep.Systems[1].Breaker != observe.BreakerOpen || rep.Systems[0].Breaker != observe.BreakerOpen {
		t.Errorf("systems %+v, want both open", rep.Systems)
	}
	if code, rep, _ := probe(t, always, http.MethodGet); code != http.StatusOK || !rep.Ready {
		t.Errorf("AlwaysReady with breakers open: %d %+v, want 200", code, rep)
	}
	if code, _, _ := probe(t, critical, http.MethodHead); code != http.StatusServiceUnavailable {
		t.Errorf("HEAD: %d, want 503", code)
	}
	if n := srv.Requests() - before; n != 0 {
		t.Errorf("the probes sent %d requests upstream, want 0", n)
	}
}

func TestCriticalSystemsPolicy(t *testing.T) {
	forced := &observe.Forced{State: observe.BreakerOpen, Until: time.Now().Add(time.Hour)}
	snap := []observe.Status{
		{System: "inv", Breaker: observe.BreakerOpen},
		{System: "pay", Breaker: observe.BreakerHalfOpen},
		{System: "ship", Breaker: observe.BreakerClosed},
		{System: "fx", Breaker: observe.BreakerOpen, Forced: forced},
		{System: "ledger", Breaker: observe.BreakerOpen, Fleet: &observe.FleetSync{Synced: true}},
		{System: "tax", Breaker: observe.BreakerOpen, Config: []config.Var{{Setting: "BreakerScope", Value: "fleet"}}},
	}
	for _, tc := range []struct {
		names []string
		want  []string
	}{
		{nil, nil},
		{[]string{"pay", "ship"}, nil}, // half-open lets its probes through: ready
		{[]string{"inv"}, []string{"inv: circuit breaker open"}},
		{[]string{"fx", "ledger", "tax"}, nil}, // forced, or shared by every pod: ready
		{[]string{"ship", "payments", "inv"}, []string{
			"payments: critical system not declared in the registry",
			"inv: circuit breaker open",
		}},
	} {
		if got := health.CriticalSystems(tc.names...)(snap); !slices.Equal(got, tc.want) {
			t.Errorf("CriticalSystems(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
	if got := health.AlwaysReady(snap); got != nil {
		t.Errorf("AlwaysReady = %q", got)
	}
}

// TestCriticalSystemsStayReadyWhenForcedOpen checks that an operator's
// forced open of a critical system, which refuses its calls, does not
// take the pod out of the Service, and that the report says it is
// forced; released, a breaker that opens on the pod's own evidence
// still does.
func TestCriticalSystemsStayReadyWhenForcedOpen(t *testing.T) {
	r, _ := newRegistry(t)
	critical := health.Readiness(r, health.CriticalSystems("pay"))
	if err := r.MustClient("pay").Force(observe.BreakerOpen, time.Hour); err != nil {
		t.Fatal(err)
	}
	code, rep, _ := probe(t, critical, http.MethodGet)
	if code != http.StatusOK || !rep.Ready || rep.Systems[1].Breaker != observe.BreakerOpen || !rep.Systems[1].Forced {
		t.Fatalf("pay forced open: %d %+v, want 200 ready showing pay forced open", code, rep)
	}
	if err := r.MustClient("pay").Force("", 0); err != nil {
		t.Fatal(err)
	}
	storm(t, r.MustClient("pay"))
	if code, rep, _ := probe(t, critical, http.MethodGet); code != http.StatusServiceUnavailable || rep.Systems[1].Forced {
		t.Errorf("pay open on its own evidence: %d %+v, want 503", code, rep)
	}
}

func TestCriticalSystemsCopiesNames(t *testing.T) {
	names := []string{"pay"}
	p := health.CriticalSystems(names...)
	names[0] = "inv"
	if got := p([]observe.Status{{System: "pay", Breaker: observe.BreakerOpen}, {System: "inv"}}); len(got) != 1 {
		t.Errorf("policy changed with the caller's slice: %q", got)
	}
}

func TestUnknownCriticalSystemIsNotReady(t *testing.T) {
	r, _ := newRegistry(t)
	code, rep, _ := probe(t, health.Readiness(r, health.CriticalSystems("payments")), http.MethodGet)
	if code != http.StatusServiceUnavailable || len(rep.Reasons) != 1 || !strings.Contains(rep.Reasons[0], "payments") {
		t.Fatalf("typo'd critical system: %d %+v, want 503 naming it", code, rep)
	}
}

func TestLiveness(t *testing.T) {
	r, srv := newRegistry(t)
	storm(t, r.MustClient("pay"))
	before := srv.Requests()
	h := health.Liveness()
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "/livez", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("%s: %d, want 200 with a breaker open", m, rec.Code)
		}
		if m == http.MethodGet && strings.TrimSpace(rec.Body.String()) != "{\n  \"status\": \"ok\"\n}" {
			t.Errorf("GET body %q", rec.Body.String())
		}
		if m == http.MethodHead && rec.Body.Len() != 0 {
			t.Errorf("HEAD body %q, want none", rec.Body.String())
		}
	}
	if n := srv.Requests() - before; n != 0 {
		t.Errorf("liveness sent %d requests upstream", n)
	}
}

func TestMethods(t *testing.T) {
	r, _ := newRegistry(t)
	for name, h := range map[string]http.Handler{
		"readiness": health.Readiness(r, health.AlwaysReady),
		"liveness":  health.Liveness(),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s POST: %d Allow=%q, want 405 GET, HEAD", name, rec.Code, rec.Header().Get("Allow"))
		}
	}
}

// TestOverRealHTTP serves both probes on a real socket, as the kubelet
// would call them.
func TestOverRealHTTP(t *testing.T) {
	r, _ := newRegistry(t)
	mux := http.NewServeMux()
	mux.Handle("/livez", health.Liveness())
	mux.Handle("/readyz", health.Readiness(r, health.CriticalSystems("pay")))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	get := func(path string) int {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("/readyz"); c != http.StatusOK {
		t.Errorf("/readyz: %d", c)
	}
	storm(t, r.MustClient("pay"))
	if c := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("/readyz with pay open: %d, want 503", c)
	}
	if c := get("/livez"); c != http.StatusOK {
		t.Errorf("/livez with pay open: %d, want 200", c)
	}
}
