package health_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/outbound-go/outbound/health"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// A route's own breaker open is shown under its system in the readiness
// report and keeps the pod ready: one operation failing is no reason to
// leave the Service.
func TestRouteOwnBreakerOpenIsShownNotUnready(t *testing.T) {
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Setenv("OUTBOUND_SYSTEMS", "inv")
	t.Setenv("INV_BASE_URL", srv.URL)
	t.Setenv("INV_RETRIES", "0")
	t.Setenv("INV_ROUTES", "export")
	t.Setenv("INV_ROUTE_EXPORT_MATCH", "GET /export")
	t.Setenv("INV_ROUTE_EXPORT_BREAKER", "own")
	t.Setenv("INV_BREAKER_MIN_REQUESTS", "3")
	t.Setenv("INV_BREAKER_OPEN_TIMEOUT", "1h")
	r, err := registry.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := r.MustClient("inv")
	for range 5 {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "/export", nil)
		if resp, err := c.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	code, rep, _ := probe(t, health.Readiness(r, health.CriticalSystems("inv")), http.MethodGet)
	if code != 200 || len(rep.Systems) != 1 || len(rep.Systems[0].Routes) != 1 || rep.Systems[0].Routes[0].Breaker != "open" {
		t.Errorf("readiness %d, %+v; want ready, with the export route's breaker open", code, rep.Systems)
	}
}
