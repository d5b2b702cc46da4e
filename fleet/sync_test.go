package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// TestFleetOpensEveryPodOnADeadUpstream: 5 pods call a dead upstream,
// one call per pod every 20ms. Local breakers each need MIN_REQUESTS
// failures; the fleet trips on the fleet's evidence, and every pod is
// open within 100ms of the first, as the calls the pods sent say
// (checkOpenTogether).
func TestFleetOpensEveryPodOnADeadUpstream(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	run := func(scope, ns string) (hits int64, late []int) {
		up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
		pods := startPods(t, 5, srv, ns, scope, up.URL, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var callers []openCaller
		for _, p := range pods {
			callers = append(callers, openCaller{"payments", p.c})
		}
		late = callUntilOpen(ctx, callers)
		if ctx.Err() != nil {
			t.Fatalf("%s: not every pod opened within 10s", scope)
		}
		return up.Requests(), late
	}
	localHits, _ := run("local", "")
	var fleetHits []int64
	var late []int
	for i := range 4 {
		h, l := run("fleet", fmt.Sprintf("dead%d", i))
		fleetHits = append(fleetHits, h)
		late = append(late, l...)
	}
	t.Logf("upstream hits before every pod refuses: local %d; fleet %v", localHits, fleetHits)
	if localHits < 5*20 {
		t.Errorf("local: %d hits, want >= 100 (5 pods x MIN_REQUESTS)", localHits)
	}
	for _, h := range fleetHits {
		if h >= localHits {
			t.Errorf("fleet: %d hits, want fewer than local's %d", h, localHits)
		}
	}
	checkOpenTogether(t, late)
}

// TestFleetOpensOnEvidenceSpreadThin: 10 pods each see 3
// failures of 3 with MIN_REQUESTS=20: no local breaker trips; the fleet's
// window holds 30 failures and trips every pod.
func TestFleetOpensOnEvidenceSpreadThin(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, scope := range []string{"local", "fleet"} {
		t.Run(scope, func(t *testing.T) {
			up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
			pods := startPods(t, 10, srv, "thin", scope, up.URL, map[string]string{"PAYMENTS_BREAKER_MIN_REQUESTS": "20"})
			ctx := context.Background()
			for _, p := range pods {
				for range 3 {
					err := get(ctx, p.c)
					// The fleet may open once its window holds
					// MIN_REQUESTS of failures (a slow machine spreads the
					// calls over its flushes), never before.
					if refused := errors.Is(err, registry.ErrCircuitOpen); refused && scope == "fleet" && up.Requests() >= 20 {
						continue
					}
					if !errors.Is(err, errStatus) {
						t.Fatalf("call: %v, want the upstream's 503 (%d sent)", err, up.Requests())
					}
				}
			}
			if scope == "local" {
				time.Sleep(500 * time.Millisecond) // what the fleet would need
				for i, p := range pods {
					if st := p.c.Status().Breaker; st != observe.BreakerClosed {
						t.Errorf("pod %d: %s, want closed (3 failures < MIN_REQUESTS)", i, st)
					}
				}
				return
			}
			d := time.Duration(0)
			for _, p := range pods {
				d = max(d, waitFor(t, syncWait, "fleet open", func() bool { return p.c.Status().Breaker == observe.BreakerOpen }))
			}
			hits := up.Requests()
			for _, p := range pods {
				if err := get(ctx, p.c); !errors.Is(err, registry.ErrCircuitOpen) {
					t.Errorf("call after the fleet opened: %v, want ErrCircuitOpen", err)
				}
			}
			if up.Requests() != hits {
				t.Errorf("the upstream saw %d calls after the fleet opened", up.Requests()-hits)
			}
			t.Logf("30 failures over 10 pods: every pod open %v after the last call", d)
		})
	}
}

// TestRedisCommandsDoNotGrowWithCalls: 5 pods calling back to back (up
// to 100,000 calls, for at most 3s) cost Redis at most pods x flush rate
// x seconds commands (plus reconnect and subscribe), as does a slow
// trickle of 100 calls over the same time: the cost does not depend on
// the call rate.
func TestRedisCommandsDoNotGrowWithCalls(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// An in-memory transport: every call runs the whole pipeline, breaker
	// included, and costs no socket, so 100,000 take seconds.
	ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	wrap := registry.WithTransportWrapper(func(string, http.RoundTripper) http.RoundTripper { return ok })
	const nPods, calls = 5, 100_000
	pods := startPods(t, nPods, srv, "count", "fleet", "http://payments.invalid", nil, wrap)
	flushRate := 1 / (200 * time.Millisecond).Seconds() // fleet.Config's default

	fast := callLoad{pods: pods, perPod: calls / nPods, most: 3 * time.Second, settle: 300 * time.Millisecond}.commands(t, srv)
	slow := callLoad{pods: pods, perPod: 100 / nPods, d: fast.elapsed, settle: 300 * time.Millisecond}.commands(t, srv)
	bound := func(d time.Duration) int { return int(float64(nPods)*flushRate*(d.Seconds()+0.3)) + 4*nPods }
	s := fast.elapsed.Seconds()
	t.Logf("%d calls in %.1fs (%.0f calls/s): %d Redis commands (%.1f/s); %d calls in %.1fs: %d; bound %d",
		fast.calls, s, float64(fast.calls)/s, fast.sent, float64(fast.sent)/s, slow.calls, slow.elapsed.Seconds(), slow.sent, bound(fast.elapsed))
	if fast.sent > bound(fast.elapsed) {
		t.Errorf("%d commands for %d calls in %.1fs, want <= %d (pods x flush rate x seconds)", fast.sent, fast.calls, s, bound(fast.elapsed))
	}
	if slow.sent > bound(slow.elapsed) {
		t.Errorf("%d commands for %d calls in %.1fs, want <= %d", slow.sent, slow.calls, slow.elapsed.Seconds(), bound(slow.elapsed))
	}
}

// scriptCommands are the commands the fleet's scripts run inside Redis;
// the fleet never sends them itself.
var scriptCommands = map[string]bool{
	"time": true, "hmget": true, "hgetall": true, "hincrby": true, "pexpire": true,
	"hset": true, "hdel": true, "del": true, "publish": true, "set": true,
	"type": true, "hget": true, "pttl": true, "get": true,
	"zadd": true, "zcard": true, "zremrangebyscore": true, "zrem": true, "hlen": true,
	"hscan": true, "unlink": true,
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
