package fleet_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// A route's own breaker (BREAKER=own) at BREAKER_SCOPE=fleet is shared by
// the fleet like its system's: failures of the route on one pod open it on
// every pod, while the system's other routes keep being served everywhere.
func TestRouteOwnBreakerIsSharedByTheFleet(t *testing.T) {
	srv := redistest.Start(t)
	var exports atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/exports") {
			exports.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	pods := startPods(t, 2, srv, "routes", "fleet", up.URL, map[string]string{
		"PAYMENTS_BREAKER_MIN_REQUESTS": "4", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "1m",
		"PAYMENTS_ROUTES": "export", "PAYMENTS_ROUTE_EXPORT_MATCH": "GET /exports/{id}",
		"PAYMENTS_ROUTE_EXPORT_BREAKER": "own",
	})
	call := func(c *registry.Client, path string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
	// Two failures on each pod: neither pod alone has the four attempts
	// the breaker needs, the fleet has.
	for range 2 {
		for _, p := range pods {
			if err := call(p.c, "/exports/1"); err != nil {
				t.Fatalf("export: %v", err)
			}
		}
	}
	waitFor(t, 5*time.Second, "the export route open on both pods", func() bool {
		for _, p := range pods {
			if st := p.c.Status(); len(st.Routes) != 1 || st.Routes[0].Breaker != "open" {
				return false
			}
		}
		return true
	})
	sent := exports.Load()
	for _, p := range pods {
		if err := call(p.c, "/exports/2"); !errors.Is(err, registry.ErrCircuitOpen) {
			t.Errorf("export on an open route: %v, want ErrCircuitOpen", err)
		}
		for range 3 {
			if err := call(p.c, "/charges/1"); err != nil {
				t.Errorf("another route beside the open export: %v", err)
			}
		}
		if st := p.c.Status(); st.Breaker != "closed" {
			t.Errorf("the system's breaker is %s, want closed", st.Breaker)
		}
	}
	if n := exports.Load(); n != sent {
		t.Errorf("%d exports sent while the route was open, want 0", n-sent)
	}
}
