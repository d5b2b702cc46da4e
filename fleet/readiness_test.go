package fleet_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/health"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// readiness asks p's readiness probe, with payments critical, as the
// kubelet does, and returns the status and the report.
func readiness(t *testing.T, p *pod) (int, health.Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	health.Readiness(p.reg, health.CriticalSystems("payments")).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var rep health.Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("readiness body %q: %v", rec.Body, err)
	}
	return rec.Code, rep
}

// TestReadinessAtFleetScopeKeepsEveryPodInService: two pods share the
// breaker of a critical system (BREAKER_SCOPE=fleet) on a real Redis.
// One pod's trip opens it on both, and an operator's forced open holds on
// both, yet neither pod's readiness takes it out of the Service: the
// breaker is the fleet's, so following it would remove every endpoint
// at once. The report still shows the breaker open, shared, and forced.
func TestReadinessAtFleetScopeKeepsEveryPodInService(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	pods := startPods(t, 2, srv, "ready", "fleet", up.URL, map[string]string{
		"PAYMENTS_BREAKER_MIN_REQUESTS": "5",
		"PAYMENTS_BREAKER_OPEN_TIMEOUT": "1h",
	})
	for _, p := range pods {
		if code, rep := readiness(t, p); code != http.StatusOK || rep.Systems[0].Scope != "fleet" {
			t.Fatalf("before any call: %d %+v, want 200 at scope fleet", code, rep)
		}
	}

	// pods[0] alone sees the failures and trips; the fleet opens on both.
	for i := 0; i < 50 && pods[0].c.Status().Breaker != observe.BreakerOpen; i++ {
		_ = get(context.Background(), pods[0].c)
	}
	everyPod(t, pods, syncWait, "the fleet's breaker open on every pod", func(p *pod) bool {
		return p.c.Status().Breaker == observe.BreakerOpen
	})
	for i, p := range pods {
		if code, rep := readiness(t, p); code != http.StatusOK || !rep.Ready || rep.Systems[0].Breaker != observe.BreakerOpen {
			t.Errorf("pod %d after the trip: %d %+v, want 200 ready showing the breaker open", i, code, rep)
		}
	}

	// An operator forces it open for every pod.
	if err := pods[1].c.Force(observe.BreakerOpen, time.Hour); err != nil {
		t.Fatal(err)
	}
	everyPod(t, pods, syncWait, "forced open on every pod", func(p *pod) bool { return forcedOn(p, observe.BreakerOpen) })
	for i, p := range pods {
		if code, rep := readiness(t, p); code != http.StatusOK || !rep.Systems[0].Forced {
			t.Errorf("pod %d forced open: %d %+v, want 200 ready showing the override", i, code, rep)
		}
	}
}
