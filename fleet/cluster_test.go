package fleet_test

import (
	"context"
	"fmt"
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

// The fleet on a Redis Cluster of three masters: the breaker's and the
// quota's own tests, with one system on each master, so that every round
// trip talks to all three.

// TestOnRedisCluster runs the fleet's core behaviours on one cluster,
// each in a namespace of its own.
func TestOnRedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t)
	t.Run("breaker opens every pod and recovers", func(t *testing.T) { clusterBreaker(t, cl) })
	t.Run("quota holds the limit across pods", func(t *testing.T) { clusterQuota(t, cl) })
	t.Run("a 429 pauses every pod", func(t *testing.T) { clusterPause(t, cl) })
	t.Run("the least rights sync", func(t *testing.T) { clusterLeastRights(t, cl) })
}

// clusterLeastRightsRules are the ACL rules docs/fleet-redis.md gives for
// a Redis Cluster: a single Redis's, and CLUSTER SLOTS, which go-redis
// reads the slot map with (without it the fleet never syncs).
var clusterLeastRightsRules = append(slices.Clone(leastRightsRules), "+cluster|slots")

// clusterLeastRights: a user with the least rights the guide gives for a
// cluster, set on every node, syncs the fleet's breakers and quotas on
// all three masters.
func clusterLeastRights(t *testing.T, cl *redistest.Cluster) {
	const user, password = "least", "s3cret-pw"
	if err := cl.Do(append([]string{"ACL", "SETUSER", user, "on", ">" + password}, clusterLeastRightsRules...)...); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(cl.URL(), "redis://", "redis://"+user+":"+password+"@", 1)
	names := spread(t, cl, "cleast")
	bases := map[string]string{}
	for _, name := range names {
		bases[name] = outboundtest.NewUpstream(t, outboundtest.Healthy()).URL
	}
	pods := startMultiPods(t, 2, userAt(url), "cleast", bases, clusterQuotaEnv)
	for _, p := range pods {
		for _, name := range names {
			if err := get(context.Background(), p.clients[name]); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	everyMasterRanScripts(t, cl)
}

// userAt is a Redis URL as a redisAt.
type userAt string

func (u userAt) URL() string { return string(u) }

// spread returns three system names whose keys in namespace ns land on
// the three masters of cl, one each.
func spread(t *testing.T, cl *redistest.Cluster, ns string) []string {
	t.Helper()
	seen := map[*redistest.Server]string{}
	for i := 0; len(seen) < len(cl.Nodes) && i < 100; i++ {
		name := fmt.Sprintf("sys%d", i)
		n, err := cl.NodeOf("outbound:fleet:{" + ns + ":" + name + "}:state")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := seen[n]; !ok {
			seen[n] = name
		}
	}
	if len(seen) != len(cl.Nodes) {
		t.Fatalf("no system names on every master: %v", seen)
	}
	return slices.Sorted(maps.Values(seen))
}

// multiPod is one pod with several systems.
type multiPod struct {
	reg     *registry.Registry
	fleet   *fleet.Fleet
	clients map[string]*registry.Client
}

// startMultiPods starts n pods of the systems in bases (name: base URL)
// on at, namespace ns, each system with the variables of env (without
// its prefix: BREAKER_SCOPE, RATE_LIMIT, ...).
func startMultiPods(t *testing.T, n int, at redisAt, ns string, bases map[string]string, env map[string]string, opts ...registry.Option) []*multiPod {
	t.Helper()
	vars := map[string]string{"OUTBOUND_FLEET_REDIS_URL": at.URL(), "OUTBOUND_FLEET_NAMESPACE": ns,
		"OUTBOUND_SYSTEMS": strings.Join(slices.Sorted(maps.Keys(bases)), ",")}
	for name, base := range bases {
		p := strings.ToUpper(name) + "_"
		vars[p+"BASE_URL"], vars[p+"RETRIES"] = base, "0"
		for k, v := range env {
			vars[p+k] = v
		}
	}
	var pods []*multiPod
	for range n {
		f, err := fleet.New(context.Background(), fleet.Config{RedisURL: at.URL(), Namespace: ns, Timeout: podTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		p := &multiPod{fleet: f, reg: registrytest.New(t, vars, registrytest.With(append(slices.Clone(opts), f.Option())...)), clients: map[string]*registry.Client{}}
		for name := range bases {
			p.clients[name] = p.reg.MustClient(name)
		}
		pods = append(pods, p)
	}
	for _, p := range pods {
		waitFor(t, syncWait, "in sync", func() bool { return p.fleet.Sync().Synced })
	}
	return pods
}

// everyMasterRanScripts fails the test unless every master of cl ran the
// fleet's scripts.
func everyMasterRanScripts(t *testing.T, cl *redistest.Cluster) {
	t.Helper()
	for _, n := range cl.Nodes {
		st, err := n.CommandStats()
		if err != nil {
			t.Fatal(err)
		}
		if st["evalsha"].Calls+st["eval"].Calls == 0 {
			t.Errorf("master %s ran no script: the fleet did not talk to it (%v)", n.Addr(), st)
		}
	}
}

// clusterBreaker: 5 pods call 3 dead upstreams (one system per master),
// one call per pod and system every 20ms: on every system every pod's
// breaker opens within 100ms of the first, as the calls the pods sent say
// (checkOpenTogether); once the upstreams heal, every breaker closes
// again.
func clusterBreaker(t *testing.T, cl *redistest.Cluster) {
	names := spread(t, cl, "cbreaker")
	var healthy atomic.Bool
	bases := map[string]string{}
	for _, name := range names {
		up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		bases[name] = up.URL
	}
	pods := startMultiPods(t, 5, cl, "cbreaker", bases, map[string]string{
		"BREAKER_SCOPE": "fleet", "BREAKER_OPEN_TIMEOUT": "500ms", "BREAKER_HALF_OPEN_PROBES": "1"})
	ctx, cancel := context.WithTimeout(context.Background(), starvedWait)
	defer cancel()
	var callers []openCaller
	for _, p := range pods {
		for name, c := range p.clients {
			callers = append(callers, openCaller{name, c})
		}
	}
	late := callUntilOpen(ctx, callers)
	if ctx.Err() != nil {
		t.Fatalf("not every pod's breaker opened within %v", starvedWait)
	}
	checkOpenTogether(t, late)
	healthy.Store(true)
	for _, p := range pods {
		for name, c := range p.clients {
			waitFor(t, syncWait, name+" closed again", func() bool {
				get(ctx, c)
				return c.Status().Breaker == observe.BreakerClosed
			})
		}
	}
	everyMasterRanScripts(t, cl)
}

// clusterQuota: 10 pods x 8 callers on each of 3 systems at
// RATE_LIMIT=200/s, scope fleet, one system per master, for 5s: the pods
// send at most 210 (limit + burst) of each system within any second, the
// shares of each system never sum above 200/s and hold at least 160/s on
// average (quotaRun.check).
func clusterQuota(t *testing.T, cl *redistest.Cluster) {
	names := spread(t, cl, "cquota")
	ups, bases := map[string]*arrivals{}, map[string]string{}
	for _, name := range names {
		ups[name] = newArrivals(t, nil)
		bases[name] = ups[name].URL
	}
	sends := &sendsBySystem{}
	pods := startMultiPods(t, 10, cl, "cquota", bases, clusterQuotaEnv, sends.option())
	for _, name := range names {
		settle(t, podsOf(pods, name), 200)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var served atomic.Int64
	start := time.Now()
	gs := map[string]*grants{}
	for _, name := range names {
		for _, p := range podsOf(pods, name) {
			drive(ctx, &wg, p, 8, 0, &served)
		}
		gs[name] = watchGrants(ctx, &wg, podsOf(pods, name))
	}
	time.Sleep(5 * time.Second)
	end := time.Now()
	cancel()
	wg.Wait()
	shareLateness(slices.Collect(maps.Values(gs))...)
	for _, name := range names {
		quotaRun{ws: windows(ups[name].since(start), start, end, time.Second), sent: sends.of(name).since(start), g: gs[name], limit: 200, burst: 10}.check(t, name)
	}
	everyMasterRanScripts(t, cl)
}

// podsOf is the pods' clients of system name, as pods of one system.
func podsOf(pods []*multiPod, name string) []*pod {
	var out []*pod
	for _, p := range pods {
		out = append(out, &pod{reg: p.reg, fleet: p.fleet, c: p.clients[name]})
	}
	return out
}

// clusterQuotaEnv is the settings of the cluster's quota tests: 200/s,
// scope fleet, requests waiting up to 2s for a token.
var clusterQuotaEnv = map[string]string{
	"RATE_LIMIT": "200/s", "RATE_SCOPE": "fleet", "RATE_MAX_WAIT": "2s",
	"CONNECT_TIMEOUT": "1s", "READ_TIMEOUT": "3s", "CALL_TIMEOUT": "5s", "MAX_CONCURRENT": "64",
}

// clusterPause: 5 pods share 200/s on each of 3 systems, one per master;
// the upstream of one answers one request with a 429 and Retry-After: 2.
// Every pod learns of the pause, which ends 2s after the answer (within
// 200ms), and sends that upstream nothing from the moment it knew until
// then (pausesSeen.check); the other systems are never paused and go on
// sending meanwhile, and a pod that starts during the pause learns of it
// from Redis (judged when it is in sync before the pause ends in Redis: on a
// starved machine it may start too late).
func clusterPause(t *testing.T, cl *redistest.Cluster) {
	names := spread(t, cl, "cpause")
	var trigger atomic.Bool
	var answered atomic.Int64
	ups, bases := map[string]*arrivals{}, map[string]string{}
	for i, name := range names {
		var h http.HandlerFunc
		if i == 0 {
			h = func(w http.ResponseWriter, r *http.Request) {
				if trigger.CompareAndSwap(true, false) {
					w.Header().Set("Retry-After", "2")
					w.WriteHeader(http.StatusTooManyRequests)
					answered.Store(time.Now().UnixNano())
				}
			}
		}
		ups[name] = newArrivals(t, h)
		bases[name] = ups[name].URL
	}
	var pods []*multiPod
	var sends []*sendsBySystem
	for range 5 {
		s := &sendsBySystem{}
		pods, sends = append(pods, startMultiPods(t, 1, cl, "cpause", bases, clusterQuotaEnv, s.option())...), append(sends, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var served atomic.Int64
	seen := map[string]*pausesSeen{}
	for _, name := range names {
		for _, p := range podsOf(pods, name) {
			drive(ctx, &wg, p, 4, 0, &served)
		}
		seen[name] = watchPauses(ctx, &wg, clientsOf(podsOf(pods, name)))
	}
	time.Sleep(time.Second)
	trigger.Store(true)
	waitFor(t, syncWait, "the 429", func() bool { return answered.Load() != 0 })
	t0 := time.Unix(0, answered.Load())
	time.Sleep(time.Second)
	late := startMultiPods(t, 1, cl, "cpause", bases, clusterQuotaEnv)[0]
	lateUntil := late.clients[names[0]].Status().Rate.PausedUntil
	end := seen[names[0]].end()
	lateAt := time.Now()
	sleepUntil(end.Add(500 * time.Millisecond))
	cancel()
	wg.Wait()
	var of []*sendTimes
	for _, s := range sends {
		of = append(of, s.of(names[0]))
	}
	seen[names[0]].check(t, names[0], of, t0)
	seen[names[0]].checkLate(t, names[0], lateUntil, lateAt, t0)
	for _, name := range names[1:] {
		n := 0
		for _, s := range sends {
			n += len(windowOf(s.of(name).since(t0), t0, end.Sub(t0)))
		}
		if slices.ContainsFunc(seen[name].at, func(at time.Time) bool { return !at.IsZero() }) {
			t.Errorf("%s was paused by the other system's 429, want it to go on", name)
		}
		if n == 0 {
			t.Errorf("%s: the pods sent nothing during the other's pause, want it to go on", name)
		}
	}
}
