package fleet_test

import (
	"context"
	"net/http"
	"slices"
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
// sends at most 2 probes across the fleet (5 local breakers would send
// 10), a round sends 2 when its pods call, and the fleet closes once the
// upstream is healthy.
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
	// About 3 half-open rounds, all failing: 1.5s, and on until one round
	// has sent its 2 probes (a starved caller may leave a lease unused in
	// a round, and a starved machine run fewer rounds), at most syncWait.
	var failing []time.Time
	var rounds []int
	waitFor(t, syncWait, "a failing round with 2 probes", func() bool {
		mu.Lock()
		failing = failing[:0]
		for _, at := range hits {
			if at.After(openedAt.Add(100 * time.Millisecond)) { // calls in flight when it opened
				failing = append(failing, at)
			}
		}
		mu.Unlock()
		rounds = roundsOf(failing)
		return time.Since(openedAt) >= 1500*time.Millisecond && len(rounds) >= 2 && slices.Max(rounds) >= 2
	})
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
	t.Logf("probes per failing half-open round, fleet-wide: %v", rounds)
	// The leases bound each round at 2 probes however the pods are run.
	for i, n := range rounds {
		if n > 2 {
			t.Errorf("round %d: %d probes fleet-wide, want at most 2 (5 local breakers would send 10)", i, n)
		}
	}
}

// roundsOf groups the times of probes into half-open rounds, 400ms
// apart, by gaps over 200ms, and counts each round's probes.
func roundsOf(at []time.Time) []int {
	var rounds []int
	for i := range at {
		if i == 0 || at[i].Sub(at[i-1]) > 200*time.Millisecond {
			rounds = append(rounds, 0)
		}
		rounds[len(rounds)-1]++
	}
	return rounds
}
