package fleet_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// TestRedisFailingLeavesCallsLocalAndFast: Redis killed, restarted
// empty and paused while 5 pods call: no call waits on Redis, local
// breakers still trip, and the pods sync again by themselves once Redis
// is back (how long it took is logged: about a second on a quiet
// machine). The pods' round trips are bounded by slowTimeout: while
// Redis is paused, the pods stay in sync for 3 x slowTimeout, and a call
// that waited on Redis would wait slowTimeout; 50 calls begun and done
// in that time (a few hundred on a starved machine) show that none does.
// The calls' latencies are logged, not judged: a starved scheduler sets
// them.
func TestRedisFailingLeavesCallsLocalAndFast(t *testing.T) {
	t.Parallel()
	const slowTimeout = 5 * time.Second
	srv := redistest.Start(t)
	var failing atomic.Bool
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	// A 2s window: the local breakers judge the last 2 seconds only, so
	// the failures outweigh the successes before them within a second or
	// two; 5 requests in it are enough (a starved machine makes few).
	// Each pod has an observer of its own: what its breaker did is told
	// to it, whether or not a poll of its status saw it.
	var pods []*pod
	logs := map[*pod]*breakerLog{}
	for range 5 {
		l := &breakerLog{}
		p := startPodsTimed(t, slowTimeout, 1, srv, "fails", "fleet", up.URL, map[string]string{
			"PAYMENTS_BREAKER_MIN_REQUESTS": "5", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "300ms", "PAYMENTS_BREAKER_WINDOW": "2s",
		}, registry.WithObserver(l))[0]
		pods, logs[p] = append(pods, p), l
	}
	var mu sync.Mutex
	phase := "baseline"
	lat := map[string][]time.Duration{}
	pausedInSync := 0 // calls begun and done while paused, their pod in sync
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				began := phase
				mu.Unlock()
				start := time.Now()
				err := get(ctx, p.c)
				d := time.Since(start)
				inSync := p.fleet.Sync().Synced
				mu.Lock()
				if err == nil {
					lat[phase] = append(lat[phase], d)
				}
				if err == nil && began == "paused" && phase == "paused" && inSync {
					pausedInSync++
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	setPhase := func(s string) {
		mu.Lock()
		phase = s
		mu.Unlock()
	}
	all := func(what string, d time.Duration, cond func(*pod) bool) time.Duration {
		return waitFor(t, d, what, func() bool {
			for _, p := range pods {
				if !cond(p) {
					return false
				}
			}
			return true
		})
	}
	synced := func(p *pod) bool { return p.fleet.Sync().Synced }
	breaker := func(s observe.BreakerState) func(*pod) bool {
		return func(p *pod) bool { return p.c.Status().Breaker == s }
	}
	// enough waits until phase ph has 50 calls to judge, however slowly a
	// starved machine runs the callers.
	enough := func(ph string) {
		waitFor(t, syncWait, ph+": 50 calls", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(lat[ph]) >= 50
		})
	}
	time.Sleep(time.Second)
	enough("baseline")

	setPhase("killed")
	srv.Kill()
	degraded := all("degraded after kill", syncWait, func(p *pod) bool { return !synced(p) })
	time.Sleep(time.Second)
	enough("killed")
	told := map[*pod]int{}
	for p, l := range logs {
		told[p] = len(l.events())
	}
	failing.Store(true) // local breakers alone must trip
	// Each pod's breaker opens, as its observer is told: not necessarily
	// at one moment, and it is open for 300ms at a time, which a starved
	// poll may miss. How soon is the callers' pace (5 failures within
	// the 2s window; a starved machine runs few), so the wait is long.
	all("every local breaker open with Redis dead", starvedWait, func(p *pod) bool {
		return slices.Contains(logs[p].events()[told[p]:], "payments closed->open")
	})
	failing.Store(false)
	all("closed again", syncWait, breaker(observe.BreakerClosed))

	setPhase("restarted")
	srv.Restart()
	afterRestart := all("in sync after a restart (empty)", syncWait, synced)
	time.Sleep(500 * time.Millisecond)
	enough("restarted")

	setPhase("paused")
	srv.Pause()
	waitFor(t, syncWait, "50 calls begun and done while Redis is paused and the pods in sync", func() bool {
		mu.Lock()
		n := pausedInSync
		mu.Unlock()
		if n >= 50 {
			return true
		}
		for i, p := range pods {
			if !synced(p) {
				t.Fatalf("pod %d lost sync with Redis paused after %d calls of 50 begun and done while in sync: calls wait on Redis", i, n)
			}
		}
		return false
	})
	pausedDegraded := all("degraded while paused", syncWait, func(p *pod) bool { return !synced(p) })
	t.Logf("paused: every pod degraded (%v after 50 calls in sync)", pausedDegraded)
	setPhase("resumed")
	srv.Resume()
	afterResume := all("in sync after resume", syncWait, synced)
	time.Sleep(500 * time.Millisecond)
	enough("resumed")
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("degraded %v after kill; in sync %v after restart, %v after resume", degraded, afterRestart, afterResume)
	for _, ph := range []string{"baseline", "killed", "restarted", "paused", "resumed"} {
		longest := slices.Max(append(lat[ph], 0))
		t.Logf("%-9s calls %5d, latency p50 %v p99 %v, longest %v", ph, len(lat[ph]), pct(lat[ph], .5), pct(lat[ph], .99), longest)
	}
}
