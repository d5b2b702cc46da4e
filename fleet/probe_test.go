package fleet_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// TestFailingHalfOpenRoundsSendTheirProbesFleetWide: 5 pods call an
// upstream that fails, HALF_OPEN_PROBES=2: every failing half-open round
// sends at most 2 probes across the fleet, and 2 when its pods call (5
// local breakers would send 10), and
// the fleet closes once the upstream is healthy.
func TestFailingHalfOpenRoundsSendTheirProbesFleetWide(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var healthy atomic.Bool
	var mu sync.Mutex
	var hits []time.Time
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, time.Now())
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	pods := startPods(t, 5, srv, "probes", "fleet", up.URL, map[string]string{
		"PAYMENTS_BREAKER_MIN_REQUESTS": "5", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "400ms", "PAYMENTS_BREAKER_HALF_OPEN_PROBES": "2",
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			for ctx.Err() == nil {
				get(ctx, p.c)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	waitFor(t, syncWait, "fleet open", func() bool { return pods[0].c.Status().Breaker == observe.BreakerOpen })
	openedAt := time.Now()
	time.Sleep(1500 * time.Millisecond) // about 3 half-open rounds, all failing
	var failing []time.Time
	mu.Lock()
	for _, at := range hits {
		if at.After(openedAt.Add(100 * time.Millisecond)) { // calls in flight when it opened
			failing = append(failing, at)
		}
	}
	mu.Unlock()
	healthy.Store(true)
	waitFor(t, syncWait, "fleet closed", func() bool {
		for _, p := range pods {
			if p.c.Status().Breaker != observe.BreakerClosed {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	// Rounds are 400ms apart: group the probes by gaps over 200ms.
	var rounds []int
	for i, at := range failing {
		if i == 0 || at.Sub(failing[i-1]) > 200*time.Millisecond {
			rounds = append(rounds, 0)
		}
		rounds[len(rounds)-1]++
	}
	t.Logf("probes per failing half-open round, fleet-wide: %v", rounds)
	if len(rounds) < 2 {
		t.Fatalf("%d rounds in 1.5s, want >= 2", len(rounds))
	}
	// The leases bound each round at 2 probes however the pods are run; a
	// starved caller may leave one of them unused, so a round of 1 is no
	// fault, but the rounds together must show pairs.
	total := 0
	for i, n := range rounds {
		total += n
		if n > 2 {
			t.Errorf("round %d: %d probes fleet-wide, want at most 2 (5 local breakers would send 10)", i, n)
		}
	}
	if total <= len(rounds) {
		t.Errorf("%d probes in %d rounds: no round sent 2, want 2 per round fleet-wide", total, len(rounds))
	}
}
