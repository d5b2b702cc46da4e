package fleet_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// The quota tests of a limit that changes while the pods run (a change
// of the settings file), and of pods that disagree on it. They are judged
// by what the quota granted and what the pods sent, from a grant life
// after the change on: until then a pod may hold a grant sized for the
// old limit.

// liveLife is the grant life of the test pods: max(4 x tick,
// ReadInterval) + Timeout, with Config's tick (200ms at a few pods) and
// ReadInterval (1s), and podTimeout.
const liveLife = time.Second + podTimeout

// liveSlack is how long after a grant life the test judges from: one
// tick, for the loop to apply what its last round trip brought.
const liveSlack = 200 * time.Millisecond

// livePods builds n pods of payments at RATE_SCOPE=fleet on srv (in
// namespace ns), each a registry built from the settings file
// OUTBOUND_CONFIG_FILE (the process environment's: t.Setenv), which holds
// settings, and returns them with the file's path. The test reloads the
// pods itself ([registry.Registry.Reload]).
func livePods(t *testing.T, n int, srv *redistest.Server, ns string, settings map[string]string, opts ...registry.Option) ([]*pod, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "settings")
	env := maps.Clone(settings)
	env["OUTBOUND_FLEET_REDIS_URL"], env["OUTBOUND_FLEET_NAMESPACE"] = srv.URL(), ns
	writeLive(t, path, env)
	t.Setenv(config.FileVar, path)
	var pods []*pod
	for range n {
		f, err := fleet.New(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: ns, Timeout: podTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() }) // after the registry's
		reg, err := registry.FromEnvWith(nil, append(slices.Clone(opts), f.Option(), registry.WithReloadInterval(time.Hour))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { registrytest.CheckClean(t, reg) })
		pods = append(pods, &pod{reg: reg, fleet: f, c: reg.MustClient("payments")})
	}
	for _, p := range pods {
		waitFor(t, syncWait, "in sync", func() bool { return p.fleet.Sync().Synced })
	}
	return pods, path
}

// writeLive writes env as a settings file at path.
func writeLive(t *testing.T, path string, env map[string]string) {
	t.Helper()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "%s=%s\n", k, env[k])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// changeLimit sets PAYMENTS_RATE_LIMIT to limit in the settings file at
// path (env the rest of it) and reloads every pod, and returns when the
// last pod had applied it.
func changeLimit(t *testing.T, pods []*pod, path string, env map[string]string, limit string) time.Time {
	t.Helper()
	env["PAYMENTS_RATE_LIMIT"] = limit
	writeLive(t, path, env)
	for i, p := range pods {
		if err := p.reg.Reload(); err != nil {
			t.Fatalf("pod %d: Reload to RATE_LIMIT=%s: %v", i, limit, err)
		}
		if got := p.c.Status().Rate.Limit; got != limit {
			t.Fatalf("pod %d: RATE_LIMIT %s after Reload, want %s", i, got, limit)
		}
	}
	return time.Now()
}

// shareSamples is the pods' shares, swept every 20ms.
type shareSamples struct {
	mu    sync.Mutex
	at    []time.Time
	sweep []sweep
	late  []time.Duration // how late the sampler's sleep before the sweep woke
}

// sampleShares samples pods until ctx ends.
func sampleShares(ctx context.Context, wg *sync.WaitGroup, pods []*pod) *shareSamples {
	s := &shareSamples{}
	wg.Go(func() {
		var late time.Duration
		for ctx.Err() == nil {
			at := time.Now()
			sw := sweepShares(pods)
			s.mu.Lock()
			s.at, s.sweep, s.late = append(s.at, at), append(s.sweep, sw), append(s.late, late)
			s.mu.Unlock()
			slept := time.Now()
			sleepCtx(ctx, 20*time.Millisecond)
			late = time.Since(slept) - 20*time.Millisecond
		}
	})
	return s
}

// between is what the samples from from to to say, as grants for
// checkGranted. The upper bound skips the samples less than lapse after
// one in which a pod was out of sync: a pod whose grant ended may have
// lost its entry in Redis too, and with it what it holds and the limit it
// runs with, which the others' grants count again only once the grants
// made without it have ended (a grant life after it is back).
func (s *shareSamples) between(from, to time.Time, lapse time.Duration) *grants {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &grants{lo: math.Inf(1), swept: true}
	total := 0.0
	var out time.Time // when a pod was last seen out of sync
	for i, at := range s.at {
		sw := s.sweep[i]
		if !sw.synced {
			out = at
		}
		if at.Before(from) || !at.Before(to) {
			continue
		}
		g.n = g.n + 1
		g.late = max(g.late, s.late[i])
		if sw.synced {
			g.judged, total = g.judged+1, total+sw.sum
		}
		g.lo = min(g.lo, sw.sum)
		if !sw.quick {
			continue
		}
		g.hi = max(g.hi, sw.sum)
		g.fellBack = max(g.fellBack, sw.fell)
		if out.IsZero() || at.Sub(out) >= lapse {
			g.granted = max(g.granted, sw.granted)
		} else {
			g.lapsed++
		}
	}
	g.mean = total / float64(max(1, g.judged))
	return g
}

// livePhase is a stretch of a run judged at one limit.
type livePhase struct {
	name     string
	limit    int
	from, to time.Time
	// lapse is how long after a pod was out of sync the shares granted
	// are not held to the limit (see between): for pods that disagree
	// on it, whose stricter limit lapses with its pod's entry.
	lapse time.Duration
}

// check judges the phase by the shares granted (never above the limit,
// at least 0.8 x the limit on average), the requests the pods sent (at
// most limit + burst + 5 in any sliding second within it) and those the
// upstream up saw (as many in each whole second of it).
func (ph livePhase) check(t *testing.T, s *shareSamples, sends *sendTimes, up *arrivals) {
	t.Helper()
	g := s.between(ph.from, ph.to, ph.lapse)
	ws := windows(up.since(ph.from), ph.from, ph.to, time.Second)
	var in []time.Time
	for _, at := range sends.since(ph.from) {
		if at.Before(ph.to) {
			in = append(in, at)
		}
	}
	burst := config.DeriveBurst(config.Rate{Events: ph.limit, Per: time.Second})
	most := sliding(in, time.Second)
	t.Logf("%s (%.1fs judged): shares granted %s; upstream's 1s windows %v; %d sent, most in any sliding 1s %d",
		ph.name, ph.to.Sub(ph.from).Seconds(), g, ws, len(in), most)
	checkGranted(t, ph.name, g, float64(ph.limit))
	bound := ph.limit + burst + 5
	if most > bound {
		t.Errorf("%s: the pods sent %d requests within one second, want at most %d (limit + burst + 5)", ph.name, most, bound)
	}
	if len(ws) > 0 && slices.Max(ws) > bound {
		t.Errorf("%s: the upstream saw %v in its 1s windows, want at most %d in each", ph.name, ws, bound)
	}
}

// TestFleetRateLimitChangeAppliesLive: 3 busy pods at RATE_SCOPE=fleet
// and 90/s; the settings file lowers the limit to 30/s on all three, then
// raises it to 150/s. From a grant life after each change on, the
// shares granted never sum above the new limit and sum to at least 0.8 x
// it on average, and the pods send at most the new limit + its burst
// within any second. The upstream's 1s windows are logged throughout.
func TestFleetRateLimitChangeAppliesLive(t *testing.T) {
	srv := redistest.Start(t)
	up := newArrivals(t, nil)
	sends := &sendTimes{}
	env := quotaEnv("90/s", map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL, "PAYMENTS_RETRIES": "0",
	})
	pods, path := livePods(t, 3, srv, "live", env, sends.option())
	env["OUTBOUND_FLEET_REDIS_URL"], env["OUTBOUND_FLEET_NAMESPACE"] = srv.URL(), "live"
	settle(t, pods, 90)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the pods close, when the test fails early
	var served atomic.Int64
	for _, p := range pods {
		drive(ctx, &wg, p, 16, 0, &served)
	}
	samples := sampleShares(ctx, &wg, pods)
	start := time.Now()
	time.Sleep(2 * time.Second)
	lowered := changeLimit(t, pods, path, env, "30/s")
	time.Sleep(time.Until(lowered.Add(liveLife + liveSlack + 2*time.Second)))
	raised := changeLimit(t, pods, path, env, "150/s")
	time.Sleep(time.Until(raised.Add(liveLife + liveSlack + 2*time.Second)))
	end := time.Now()
	cancel()
	wg.Wait()

	ws := windows(up.since(start), start, end, time.Second)
	t.Logf("upstream's 1s windows %v: lowered to 30/s at %.1fs, raised to 150/s at %.1fs (grant life %v); %d served",
		ws, lowered.Sub(start).Seconds(), raised.Sub(start).Seconds(), liveLife, served.Load())
	t.Logf("shares granted during the changes: lowering %s; raising %s",
		samples.between(lowered, lowered.Add(liveLife+liveSlack), 0), samples.between(raised, raised.Add(liveLife+liveSlack), 0))
	for _, ph := range []livePhase{
		{"at 90/s", 90, start.Add(500 * time.Millisecond), lowered, 0},
		{"lowered to 30/s", 30, lowered.Add(liveLife + liveSlack), raised, 0},
		{"raised to 150/s", 150, raised.Add(liveLife + liveSlack), end, 0},
	} {
		ph.check(t, samples, sends, up)
	}
}

// TestQuotaOfPodsThatDisagreeOnTheLimitStaysWithinTheStricter: pod a runs at
// 100/s and pod b at 50/s (their settings differ, as while a change
// reaches them one by one); a is busy, b asks for a little. Once a grant
// life has passed since both run and hold a grant, the shares granted
// never sum above 50/s (a alone would take all of its 100/s but what b
// holds), and the pods send at most 50/s + a burst within any second.
// A b whose grant ended (its loop starved past it) may have lost its
// entry, and a may then be granted up to its own limit until a grant
// life after b is back: those samples are logged, not judged.
func TestQuotaOfPodsThatDisagreeOnTheLimitStaysWithinTheStricter(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := newArrivals(t, nil)
	sends := &sendTimes{}
	a := startPods(t, 1, srv, "disagree", "local", up.URL, quotaEnv("100/s", nil), sends.option())[0]
	b := startPods(t, 1, srv, "disagree", "local", up.URL, quotaEnv("50/s", nil), sends.option())[0]
	both := time.Now()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the pods close, when the test fails early
	var served atomic.Int64
	drive(ctx, &wg, a, 8, 0, &served)
	drive(ctx, &wg, b, 1, 100*time.Millisecond, &served)
	pods := []*pod{a, b}
	samples := sampleShares(ctx, &wg, pods)
	from := both.Add(liveLife + liveSlack)
	time.Sleep(time.Until(from.Add(3 * time.Second)))
	end := time.Now()
	cancel()
	wg.Wait()

	t.Logf("upstream's 1s windows %v (both pods run from 0s, judged from %.1fs); shares now a %.1f/s, b %.1f/s",
		windows(up.since(both), both, end, time.Second), from.Sub(both).Seconds(),
		a.c.Status().Rate.Share, b.c.Status().Rate.Share)
	livePhase{"a at 100/s, b at 50/s", 50, from, end, liveLife + liveSlack}.check(t, samples, sends, up)
}
