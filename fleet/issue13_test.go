package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// pod is one registry standing for one pod of a service, with its fleet
// when the scope is fleet.
type pod struct {
	reg   *registry.Registry
	fleet *fleet.Fleet
	c     *registry.Client
}

// startPods builds n pods calling baseURL at scope "local" or "fleet" (in
// namespace ns of srv), with extra variables and registry options.
func startPods(t *testing.T, n int, srv *redistest.Server, ns, scope, baseURL string, extra map[string]string, opts ...registry.Option) []*pod {
	t.Helper()
	var pods []*pod
	for range n {
		env := map[string]string{
			"OUTBOUND_SYSTEMS":       "payments",
			"PAYMENTS_BASE_URL":      baseURL,
			"PAYMENTS_RETRIES":       "0",
			"PAYMENTS_BREAKER_SCOPE": scope,
		}
		maps.Copy(env, extra)
		p := &pod{}
		ropts := slices.Clone(opts)
		if scope == "fleet" {
			env["OUTBOUND_FLEET_REDIS_URL"], env["OUTBOUND_FLEET_NAMESPACE"] = srv.URL(), ns
			f, err := fleet.New(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() }) // after the registry's (cleanups run last first)
			p.fleet = f
			ropts = append(ropts, f.Option())
		}
		p.reg = registrytest.New(t, env, registrytest.With(ropts...))
		p.c = p.reg.MustClient("payments")
		pods = append(pods, p)
	}
	for _, p := range pods {
		if p.fleet != nil {
			waitFor(t, 2*time.Second, "in sync", func() bool { return p.fleet.Sync().Synced })
		}
	}
	return pods
}

var errStatus = errors.New("failed status")

// get makes one call and reads the whole answer.
func get(ctx context.Context, c *registry.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/pay", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return errStatus
	}
	return nil
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestIssue13DeadUpstream (issue #13, test 1): 5 pods call a dead upstream,
// one call per pod every 20ms. Local breakers each need MIN_REQUESTS
// failures; the fleet trips on the fleet's evidence, and every pod is
// open within 100ms (p99) of the first.
func TestIssue13DeadUpstream(t *testing.T) {
	srv := redistest.Start(t)
	run := func(scope, ns string) (hits int64, lags []time.Duration) {
		up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
		pods := startPods(t, 5, srv, ns, scope, up.URL, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		opened := make([]time.Time, len(pods))
		var wg sync.WaitGroup
		for i, p := range pods {
			var open atomic.Bool
			wg.Go(func() { // the watcher: when did this pod's breaker open?
				for ctx.Err() == nil && p.c.Status().Breaker != observe.BreakerOpen {
					time.Sleep(200 * time.Microsecond)
				}
				opened[i] = time.Now()
				open.Store(true)
			})
			wg.Go(func() { // the caller
				for ctx.Err() == nil && !open.Load() {
					get(ctx, p.c)
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		if ctx.Err() != nil {
			t.Fatalf("%s: not every pod opened within 10s", scope)
		}
		first := slices.MinFunc(opened, func(a, b time.Time) int { return a.Compare(b) })
		for _, at := range opened {
			lags = append(lags, at.Sub(first))
		}
		return up.Requests(), lags
	}
	localHits, _ := run("local", "")
	var fleetHits []int64
	var lags []time.Duration
	for i := range 4 {
		h, l := run("fleet", fmt.Sprintf("dead%d", i))
		fleetHits = append(fleetHits, h)
		lags = append(lags, l...)
	}
	t.Logf("upstream hits before every pod refuses: local %d; fleet %v", localHits, fleetHits)
	t.Logf("pods open after the first: p50 %v, p99 %v, max %v (%d pods)", pct(lags, .5), pct(lags, .99), slices.Max(lags), len(lags))
	if localHits < 5*20 {
		t.Errorf("local: %d hits, want >= 100 (5 pods x MIN_REQUESTS)", localHits)
	}
	for _, h := range fleetHits {
		if h >= localHits {
			t.Errorf("fleet: %d hits, want fewer than local's %d", h, localHits)
		}
	}
	if p99 := pct(lags, .99); p99 > 100*time.Millisecond {
		t.Errorf("every pod open %v (p99) after the first, want <= 100ms", p99)
	}
}

// TestIssue13EvidenceSpreadThin (issue #13, test 2): 10 pods each see 3
// failures of 3 with MIN_REQUESTS=20: no local breaker trips; the fleet's
// window holds 30 failures and trips every pod.
func TestIssue13EvidenceSpreadThin(t *testing.T) {
	srv := redistest.Start(t)
	for _, scope := range []string{"local", "fleet"} {
		t.Run(scope, func(t *testing.T) {
			up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
			pods := startPods(t, 10, srv, "thin", scope, up.URL, map[string]string{"PAYMENTS_BREAKER_MIN_REQUESTS": "20"})
			ctx := context.Background()
			for _, p := range pods {
				for range 3 {
					if err := get(ctx, p.c); !errors.Is(err, errStatus) {
						t.Fatalf("call: %v, want the upstream's 503", err)
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
				d = max(d, waitFor(t, 2*time.Second, "fleet open", func() bool { return p.c.Status().Breaker == observe.BreakerOpen }))
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

// TestIssue13HalfOpenProbes (issue #13, test 3): 5 pods, HALF_OPEN_PROBES=2.
func TestIssue13HalfOpenProbes(t *testing.T) {
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
	waitFor(t, 3*time.Second, "fleet open", func() bool { return pods[0].c.Status().Breaker == observe.BreakerOpen })
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
	waitFor(t, 3*time.Second, "fleet closed", func() bool {
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
	for i, n := range rounds {
		if n != 2 {
			t.Errorf("round %d: %d probes fleet-wide, want 2 (5 local breakers would send 10)", i, n)
		}
	}
}

// TestIssue13RedisFails (issue #13, test 5): Redis killed, restarted
// empty and paused while 5 pods call: latency is unchanged, local
// breakers still trip, and sync is back within 2s of Redis returning.
func TestIssue13RedisFails(t *testing.T) {
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

// TestIssue13RedisCommands (issue #13, test 6): 100,000 calls through 5
// pods cost Redis at most pods x flush rate x seconds commands (plus
// reconnect and subscribe), the same as a slow trickle of calls over the
// same time: the cost does not depend on the call rate.
func TestIssue13RedisCommands(t *testing.T) {
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

	measure := func(perPod int, d time.Duration) (int, time.Duration) {
		if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for _, p := range pods {
			wg.Go(func() {
				var gap time.Duration
				if d > 0 {
					gap = d / time.Duration(perPod)
				}
				for range perPod {
					if err := get(context.Background(), p.c); err != nil {
						t.Errorf("call: %v", err)
						return
					}
					if gap > 0 {
						time.Sleep(gap)
					}
				}
			})
		}
		wg.Wait()
		if rest := d - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
		elapsed := time.Since(start)
		time.Sleep(300 * time.Millisecond) // the last flush
		stats, err := srv.CommandCalls()
		if err != nil {
			t.Fatal(err)
		}
		// Commands the pods sent; those the scripts run inside Redis
		// (TIME, HMGET, HINCRBY, ...) are counted apart.
		n, inside := 0, 0
		for cmd, k := range stats {
			switch {
			case cmd == "info" || strings.HasPrefix(cmd, "config"): // the test's own
			case scriptCommands[cmd]:
				inside += k
			default:
				n += k
			}
		}
		t.Logf("commands sent %d, run inside scripts %d: %v", n, inside, stats)
		return n, elapsed
	}
	fast, secs := measure(calls/nPods, 0)
	slow, _ := measure(100/nPods, secs)
	s := secs.Seconds()
	bound := int(float64(nPods)*flushRate*(s+0.3)) + 4*nPods
	t.Logf("%d calls in %.1fs (%.0f calls/s): %d Redis commands (%.1f/s); 100 calls over the same time: %d; bound %d",
		calls, s, calls/s, fast, float64(fast)/s, slow, bound)
	if fast > bound {
		t.Errorf("%d commands for %d calls in %.1fs, want <= %d (pods x flush rate x seconds)", fast, calls, s, bound)
	}
	if slow > bound {
		t.Errorf("%d commands for 100 calls in %.1fs, want <= %d", slow, s, bound)
	}
}

// scriptCommands are the commands the fleet's scripts run inside Redis;
// the fleet never sends them itself.
var scriptCommands = map[string]bool{
	"time": true, "hmget": true, "hgetall": true, "hincrby": true, "pexpire": true,
	"hset": true, "hdel": true, "del": true, "publish": true, "set": true,
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
