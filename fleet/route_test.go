package fleet_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
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
	t.Parallel()
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
	// Two failures on each pod: neither pod alone has the four attempts
	// the breaker needs, the fleet has.
	for range 2 {
		for _, p := range pods {
			if err := routeGet(p.c, "/exports/1"); err != nil {
				t.Fatalf("export: %v", err)
			}
		}
	}
	waitFor(t, syncWait, "the export route open on both pods", func() bool {
		for _, p := range pods {
			if st := p.c.Status(); len(st.Routes) != 1 || st.Routes[0].Breaker != "open" {
				return false
			}
		}
		return true
	})
	sent := exports.Load()
	for _, p := range pods {
		if err := routeGet(p.c, "/exports/2"); !errors.Is(err, registry.ErrCircuitOpen) {
			t.Errorf("export on an open route: %v, want ErrCircuitOpen", err)
		}
		for range 3 {
			if err := routeGet(p.c, "/charges/1"); err != nil {
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

// A route's own RATE_LIMIT at RATE_SCOPE=fleet is shared by the fleet like
// its system's: two pods hammering the route send, together, no more than
// the route's limit allows (each pod alone at the limit would send twice
// that), the route's requests past it are refused, and the system's other
// requests, under the system's much larger limit, are never refused.
func TestRouteRateLimitIsSharedByTheFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var searches atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/search" {
			searches.Add(1)
		}
		_, _ = io.WriteString(w, "ok")
	}))
	const routeLimit = 20
	pods := startPods(t, 2, srv, "routerate", "local", up.URL, map[string]string{
		"PAYMENTS_RATE_SCOPE": "fleet", "PAYMENTS_RATE_LIMIT": "1000/s", "PAYMENTS_RATE_MAX_WAIT": "0",
		"PAYMENTS_ROUTES": "search", "PAYMENTS_ROUTE_SEARCH_MATCH": "GET /search",
		"PAYMENTS_ROUTE_SEARCH_RATE_LIMIT": "20/s",
	})
	waitFor(t, syncWait, "a share of both limits on each pod", func() bool {
		for _, p := range pods {
			st := p.c.Status()
			if st.Rate == nil || st.Rate.Share == 0 || len(st.Routes) != 1 || st.Routes[0].Rate == nil || st.Routes[0].Rate.Share == 0 {
				return false
			}
		}
		return true
	})
	var refused, otherRefused, otherSent atomic.Int64
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range pods {
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if err := routeGet(p.c, "/search"); errors.Is(err, registry.ErrRateLimited) {
						refused.Add(1)
						time.Sleep(time.Millisecond) // a refusal costs no I/O: do not spin
					} else if err != nil {
						t.Errorf("search: %v", err)
						return
					}
				}
			})
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				switch err := routeGet(p.c, "/charges/1"); {
				case errors.Is(err, registry.ErrRateLimited):
					otherRefused.Add(1)
				case err != nil:
					t.Errorf("charges: %v", err)
					return
				default:
					otherSent.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	sent := searches.Load()
	most := int64(routeLimit * (elapsed.Seconds() + 1)) // the limit over the run, and a second's burst and shares settling
	t.Logf("in %v: %d searches sent, %d refused; %d other calls sent, %d refused", elapsed.Round(time.Millisecond), sent, refused.Load(), otherSent.Load(), otherRefused.Load())
	if sent > most {
		t.Errorf("the pods sent %d searches in %v, want at most %d (the route's %d/s, shared by the fleet)", sent, elapsed.Round(time.Millisecond), most, routeLimit)
	}
	if sent == 0 || refused.Load() == 0 {
		t.Errorf("%d searches sent and %d refused, want both: the route's limit lets its share through and refuses past it", sent, refused.Load())
	}
	if otherRefused.Load() != 0 || otherSent.Load() == 0 {
		t.Errorf("the system's other calls: %d refused, %d sent; want none refused: only the route is limited", otherRefused.Load(), otherSent.Load())
	}
}

// routeGet sends GET path through c, bounded by 5s, and reads and closes
// the answer.
func routeGet(c *registry.Client, path string) error {
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
