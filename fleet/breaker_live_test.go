package fleet_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// TestBreakerRuleChangesWhileTheFleetRuns: 3 pods at BREAKER_SCOPE=fleet
// with a minimum of 50 requests; 12 calls fail, which the fleet's window
// counts and does not trip on. A change of the settings file lowers the
// minimum to 5 on every pod: the window, kept, breaks the new rule, and
// every pod opens, with no call more. CALL_TIMEOUT sizes a half-open
// probe's lease in Redis, so a change of it at scope fleet is refused as
// needing a restart.
func TestBreakerRuleChangesWhileTheFleetRuns(t *testing.T) {
	srv := redistest.Start(t)
	var reached atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	env := map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL, "PAYMENTS_RETRIES": "0",
		"PAYMENTS_BREAKER_SCOPE": "fleet", "PAYMENTS_BREAKER_MIN_REQUESTS": "50", "PAYMENTS_BREAKER_FAILURE_RATIO": "0.5",
		"PAYMENTS_BREAKER_OPEN_TIMEOUT": "1m",
	}
	pods, path := livePods(t, 3, srv, "rule", env)
	env["OUTBOUND_FLEET_REDIS_URL"], env["OUTBOUND_FLEET_NAMESPACE"] = srv.URL(), "rule"
	for i := range 12 {
		_ = get(context.Background(), pods[i%3].c)
	}
	// The fleet's window holds the 12 failures once every pod has
	// flushed them: a periodic read (1s) shows them to each.
	waitFor(t, syncWait, "the fleet's window holds the 12 failures", func() bool {
		for _, p := range pods {
			if p.c.Status().BreakerCounts.Failures < 4 {
				return false
			}
		}
		return true
	})
	time.Sleep(1500 * time.Millisecond) // a periodic read or more on every pod
	for i, p := range pods {
		if st := p.c.Status(); st.Breaker != observe.BreakerClosed {
			t.Fatalf("pod %d: %s after 12 failures of a minimum of 50, want closed", i, st.Breaker)
		}
	}
	before := reached.Load()

	env["PAYMENTS_BREAKER_MIN_REQUESTS"] = "5"
	writeLive(t, path, env)
	for i, p := range pods {
		if err := p.reg.Reload(); err != nil {
			t.Fatalf("pod %d: Reload to BREAKER_MIN_REQUESTS=5: %v", i, err)
		}
	}
	waitFor(t, syncWait, "every pod open under the new minimum", func() bool {
		for _, p := range pods {
			if p.c.Status().Breaker != observe.BreakerOpen {
				return false
			}
		}
		return true
	})
	if n := reached.Load() - before; n != 0 {
		t.Errorf("%d requests reached the upstream after the change, want none: the kept window trips the new rule", n)
	}

	env["PAYMENTS_CALL_TIMEOUT"] = "20s"
	writeLive(t, path, env)
	if err := pods[0].reg.Reload(); err == nil || !strings.Contains(err.Error(), "PAYMENTS_CALL_TIMEOUT changed") {
		t.Errorf("a change of CALL_TIMEOUT at BREAKER_SCOPE=fleet: %v, want it refused as needing a restart", err)
	}
}
