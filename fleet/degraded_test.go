package fleet_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// TestRedisFailingLeavesCallsLocalAndFast: Redis killed, restarted
// empty and paused while 5 pods call: latency is unchanged, local
// breakers still trip, and sync is back within 2s of Redis returning.
func TestRedisFailingLeavesCallsLocalAndFast(t *testing.T) {
	srv := redistest.Start(t)
	var failing atomic.Bool
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	// A 1s window: the local breakers judge the last second only, so the
	// failures outweigh the successes before them within a second or so.
	pods := startPods(t, 5, srv, "fails", "fleet", up.URL, map[string]string{
		"PAYMENTS_BREAKER_MIN_REQUESTS": "10", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "300ms", "PAYMENTS_BREAKER_WINDOW": "1s",
	})
	var mu sync.Mutex
	phase := "baseline"
	lat := map[string][]time.Duration{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				err := get(ctx, p.c)
				d := time.Since(start)
				if err == nil {
					mu.Lock()
					lat[phase] = append(lat[phase], d)
					mu.Unlock()
				}
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
	time.Sleep(time.Second)

	setPhase("killed")
	srv.Kill()
	degraded := all("degraded after kill", 2*time.Second, func(p *pod) bool { return !synced(p) })
	time.Sleep(time.Second)
	failing.Store(true) // local breakers alone must trip
	all("every local breaker open with Redis dead", 10*time.Second, breaker(observe.BreakerOpen))
	failing.Store(false)
	all("closed again", 3*time.Second, breaker(observe.BreakerClosed))

	setPhase("restarted")
	srv.Restart()
	afterRestart := all("in sync after a restart (empty)", 2*time.Second, synced)
	time.Sleep(500 * time.Millisecond)

	setPhase("paused")
	srv.Pause()
	time.Sleep(1500 * time.Millisecond)
	pausedDegraded := all("degraded while paused", 2*time.Second, func(p *pod) bool { return !synced(p) })
	t.Logf("paused: every pod degraded (after 1.5s paused, %v more)", pausedDegraded)
	setPhase("resumed")
	srv.Resume()
	afterResume := all("in sync after resume", 2*time.Second, synced)
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	// A call that waited on Redis would wait its 100ms timeout while Redis
	// is paused: the median would show it. The p99 is logged, and only
	// checked against gross waits, since a shared 2-core machine stalls a
	// process now and then.
	base := pct(lat["baseline"], .5)
	t.Logf("degraded %v after kill; in sync %v after restart, %v after resume", degraded, afterRestart, afterResume)
	for _, ph := range []string{"baseline", "killed", "restarted", "paused", "resumed"} {
		p99 := pct(lat[ph], .99)
		t.Logf("%-9s calls %5d, latency p50 %v p99 %v", ph, len(lat[ph]), pct(lat[ph], .5), p99)
		if len(lat[ph]) < 50 {
			t.Errorf("%s: %d calls, want >= 50", ph, len(lat[ph]))
		}
		if p50 := pct(lat[ph], .5); p50 > base+5*time.Millisecond || p99 > 250*time.Millisecond {
			t.Errorf("%s: p50 %v (baseline %v), p99 %v: calls waited on Redis", ph, p50, base, p99)
		}
	}
}
