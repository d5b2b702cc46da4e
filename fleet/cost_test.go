package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// What the fleet costs Redis: pods (registries in one process) with many
// systems at BREAKER_SCOPE=fleet and RATE_SCOPE=fleet, idle or busy,
// measured with INFO commandstats (the CPU time of the commands the pods
// sent, scripts included) and INFO cpu (the whole redis-server process,
// sockets included).

// costSetup is one measurement: pods pods of systems systems each, every
// system called callsPerSec times a second on every pod (0: idle), for d
// once the pods have settled. With crowd above pods, the test keeps
// crowd - pods more pods alive in the count of the namespace's pods, so
// that the pods tick as in a fleet of crowd pods (pace.go).
type costSetup struct {
	pods, systems int
	callsPerSec   int
	d             time.Duration
	crowd         int
	longest       bool // read the longest script call from SLOWLOG
}

// cost is what a setup cost Redis, per second of the run.
type cost struct {
	scripts  float64       // script calls (EVALSHA, EVAL, FCALL)
	commands float64       // every command the pods sent
	usec     float64       // Redis CPU in those commands (commandstats), µs
	cpu      float64       // Redis process CPU (INFO cpu), µs
	calls    float64       // calls made through the registries
	inside   float64       // commands the scripts ran inside Redis
	longest  time.Duration // the longest script call (SLOWLOG)
	// scriptUsec is the Redis CPU in script calls, inner commands
	// included, µs
	scriptUsec float64
	each       map[string]int // the calls of each command run inside scripts
	// idle is the process CPU of the same redis-server before any client
	// came, µs a second (its own cron, the machine's timers), measured in
	// the same run
	idle float64
	// floor is the process CPU under the pods' own: the idle server's,
	// and with a crowd, the crowd's writes too (the work of the pods it
	// stands for, not of the pods measured), µs a second, measured before
	// the pods came
	floor float64
}

func (c cost) String() string {
	return fmt.Sprintf("%.0f scripts/s, %.0f commands/s, %.0f µs/s in commands, %.0f µs/s process CPU (%.0f calls/s)",
		c.scripts, c.commands, c.usec, c.cpu, c.calls)
}

// perPod is c divided among pods.
func (c cost) perPod(pods int) cost {
	n := float64(pods)
	return cost{c.scripts / n, c.commands / n, c.usec / n, c.cpu / n, c.calls / n, c.inside / n, c.longest, c.scriptUsec / n, c.each, c.idle, c.floor}
}

// scriptCalls are the commands that run a script.
var scriptCalls = map[string]bool{"evalsha": true, "eval": true, "evalsha_ro": true, "eval_ro": true, "fcall": true, "fcall_ro": true}

// costPods starts s.pods registries of s.systems systems at scope fleet
// on srv, each call answered in memory.
func costPods(t testing.TB, srv *redistest.Server, ns string, s costSetup) []*registry.Registry {
	t.Helper()
	env := map[string]string{"OUTBOUND_FLEET_REDIS_URL": srv.URL(), "OUTBOUND_FLEET_NAMESPACE": ns}
	var names []string
	for i := range s.systems {
		name := fmt.Sprintf("s%02d", i)
		names = append(names, name)
		p := strings.ToUpper(name) + "_"
		env[p+"BASE_URL"] = "http://" + name + ".invalid"
		env[p+"BREAKER_SCOPE"] = "fleet"
		env[p+"RATE_LIMIT"] = "100000/s"
		env[p+"RATE_SCOPE"] = "fleet"
		env[p+"RATE_MAX_WAIT"] = "1s"
	}
	env["OUTBOUND_SYSTEMS"] = strings.Join(names, ",")
	ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	wrap := registry.WithTransportWrapper(func(string, http.RoundTripper) http.RoundTripper { return ok })
	var regs []*registry.Registry
	for range s.pods {
		f, err := fleet.New(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		regs = append(regs, registrytest.New(t, env, registrytest.With(wrap, f.Option())))
		t.Cleanup(func() {
			if st := f.Sync(); !st.Synced {
				t.Logf("a pod was out of sync at the end: %s", st.LastError)
			}
		})
	}
	return regs
}

// measureCost runs s against a redis-server of its own and returns what
// it cost Redis per second.
func measureCost(t testing.TB, s costSetup) cost {
	t.Helper()
	srv := redistest.Start(t)
	idle := idleCPU(t, srv, 2*time.Second)
	floor := idle
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var crowdWrites atomic.Int64
	if s.crowd > s.pods {
		wg.Go(func() { keepAlive(ctx, t, srv, "cost", s.crowd-s.pods, &crowdWrites) })
		// The crowd alone, over two of its writes: what the pods it
		// stands for cost, each saying it is alive.
		floor = idleCPU(t, srv, 2*crowdEvery)
	}
	regs := costPods(t, srv, "cost", s)
	time.Sleep(3 * time.Second) // the shares settle, the pods join and count each other
	var mu sync.Mutex
	calls := 0
	if s.callsPerSec > 0 {
		for _, reg := range regs {
			for _, name := range reg.Names() {
				c := reg.MustClient(name)
				wg.Go(func() {
					n := callEvery(ctx, c, time.Second/time.Duration(s.callsPerSec))
					mu.Lock()
					calls += n
					mu.Unlock()
				})
			}
		}
	}
	before := redisCost(t, srv, true, s.longest)
	writes0 := crowdWrites.Load()
	start := time.Now()
	time.Sleep(s.d)
	after := redisCost(t, srv, false, s.longest)
	secs := time.Since(start).Seconds()
	cancel()
	wg.Wait()
	// The crowd's ZADDs since the reset are not the pods': counted with
	// the commands run inside scripts, they come out of them.
	if n := float64(crowdWrites.Load() - writes0); n > 0 && after.each != nil {
		n = min(n, float64(after.each["zadd"]))
		after.each["zadd"] -= int(n)
		after.inside -= n
	}
	c := cost{
		scripts: after.scripts / secs, commands: after.commands / secs, usec: after.usec / secs,
		cpu: (after.cpu - before.cpu) / secs, calls: float64(calls) / secs,
		inside: after.inside / secs, longest: after.longest, scriptUsec: after.scriptUsec / secs, each: after.each,
		idle: idle, floor: floor,
	}
	return c
}

// idleCPU is srv's process CPU over d with no client, µs a second.
func idleCPU(t testing.TB, srv *redistest.Server, d time.Duration) float64 {
	t.Helper()
	before, err := srv.CPU()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	time.Sleep(d)
	after, err := srv.CPU()
	if err != nil {
		t.Fatal(err)
	}
	return float64((after - before).Microseconds()) / time.Since(start).Seconds()
}

// crowdEvery is how often keepAlive writes its crowd.
const crowdEvery = 2 * time.Second

// keepAlive keeps n pods that do not exist alive in the count of the
// pods of namespace ns until ctx ends, as pods say they are alive: one
// ZADD every crowdEvery, each alive for 2.9s (a pod's life is 3s),
// counted in writes.
func keepAlive(ctx context.Context, t testing.TB, srv *redistest.Server, ns string, n int, writes *atomic.Int64) {
	for ctx.Err() == nil {
		if err := writeAlive(srv, ns, n, 2900*time.Millisecond); err != nil {
			t.Errorf("keeping the crowd alive: %v", err)
			return
		}
		writes.Add(1)
		sleepCtx(ctx, crowdEvery)
	}
}

// redisCost reads srv's counts: commands since the last reset (and resets
// them when reset is set), and the process's CPU since it started.
func redisCost(t testing.TB, srv *redistest.Server, reset, longest bool) cost {
	t.Helper()
	var c cost
	if reset {
		for _, words := range [][]string{{"CONFIG", "RESETSTAT"}, {"CONFIG", "SET", "slowlog-log-slower-than", "100"},
			{"CONFIG", "SET", "slowlog-max-len", "4096"}, {"SLOWLOG", "RESET"}} {
			if _, err := srv.Do(words...); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		if longest {
			c.longest = longestScript(t, srv)
		}
		stats, err := srv.CommandStats()
		if err != nil {
			t.Fatal(err)
		}
		for name, st := range stats {
			switch {
			case name == "info" || strings.HasPrefix(name, "config") || strings.HasPrefix(name, "slowlog"):
				// the test's own
			case scriptCommands[name]:
				c.inside += float64(st.Calls) // counted in its script's usec
				if c.each == nil {
					c.each = map[string]int{}
				}
				c.each[name] = st.Calls
			default:
				c.commands += float64(st.Calls)
				c.usec += float64(st.Usec)
				if scriptCalls[name] {
					c.scripts += float64(st.Calls)
					c.scriptUsec += float64(st.Usec)
				}
			}
		}
	}
	cpu, err := srv.CPU()
	if err != nil {
		t.Fatal(err)
	}
	c.cpu = float64(cpu.Microseconds())
	return c
}

// callEvery calls c once every gap until ctx ends, and returns the calls
// it made.
func callEvery(ctx context.Context, c *registry.Client, gap time.Duration) int {
	tick := time.NewTicker(gap)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
		get(ctx, c)
		n++
	}
}

// longestScript is the longest script call in srv's SLOWLOG (which
// redisCost set to log every command of 100µs or more, the last 4,096).
func longestScript(t testing.TB, srv *redistest.Server) time.Duration {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: syncWait, ReadTimeout: syncWait, WriteTimeout: syncWait})
	defer rdb.Close()
	log, err := rdb.SlowLogGet(context.Background(), -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var most time.Duration
	for _, e := range log {
		if len(e.Args) > 0 && scriptCalls[strings.ToLower(e.Args[0])] {
			most = max(most, e.Duration)
		}
	}
	return most
}

// report gives b the figures of c, measured on pods pods.
func (c cost) report(b *testing.B, pods int) {
	p := c.perPod(pods)
	b.ReportMetric(p.cpu/1000, "redis-cpu-ms/pod/s")
	// The idle server's own CPU in the same run; the floor, that and the
	// crowd's writes (the pods it stands for saying they are alive); and
	// what is left of the process CPU above the floor, per pod: what each
	// pod measured adds to Redis, which is what 1,000 pods cost 1,000
	// times over. The raw figure above divides the floor among the pods
	// measured alone.
	b.ReportMetric(c.idle/1000, "redis-idle-cpu-ms/s")
	b.ReportMetric(c.floor/1000, "redis-floor-cpu-ms/s")
	b.ReportMetric((c.cpu-c.floor)/float64(pods)/1000, "redis-net-cpu-ms/pod/s")
	b.ReportMetric(p.usec/1000, "commands-ms/pod/s")
	b.ReportMetric(p.scripts, "scripts/pod/s")
	b.ReportMetric(p.commands, "commands/pod/s")
	if c.scripts > 0 {
		b.ReportMetric(c.inside/c.scripts, "inner-commands/script")
		b.ReportMetric(c.scriptUsec/c.scripts, "mean-script-us")
	}
	b.ReportMetric(float64(c.longest.Microseconds()), "max-script-us")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRedisCost measures what 50 systems at scope fleet (breaker
// and quota) cost Redis on 5 and 20 pods, and on 5 and 20 pods that
// count 1,000 (they tick as in a fleet of 1,000), idle and busy (every
// system called 20 times a second on every pod): Redis CPU per pod per
// second (INFO cpu: the whole process), the CPU in the pods' commands
// (commandstats), script calls and commands per pod per second, the
// commands one script call runs inside Redis, and the longest script
// call (SLOWLOG). The process CPU comes raw and net of its floor (the
// idle server, and the crowd's writes standing for the pods not run),
// per pod. Each run takes 13 s, 17 s with a crowd; without -race for
// figures that are the Redis server's alone:
//
//	go test -run '^$' -bench 'RedisCost|QuotaRecount' -benchtime 1x ./fleet/
func BenchmarkRedisCost(b *testing.B) {
	const systems = 50
	for _, busy := range []bool{false, true} {
		for _, size := range [][2]int{{5, 5}, {20, 20}, {5, 1000}, {20, 1000}} {
			pods, crowd := size[0], size[1]
			s := costSetup{pods: pods, systems: systems, d: 8 * time.Second, crowd: crowd, longest: true}
			load := "idle"
			if busy {
				s.callsPerSec, load = 20, "busy"
			}
			b.Run(fmt.Sprintf("%s/%dpods/counting%d", load, pods, crowd), func(b *testing.B) {
				var c cost
				for range b.N {
					c = measureCost(b, s)
				}
				b.Logf("%d pods (ticking as %d) x %d systems, %s: %v; longest script %v; inside the scripts: %v",
					pods, crowd, systems, load, c, c.longest, c.each)
				c.report(b, pods)
			})
		}
	}
}

// TestRedisCostFollowsPodsNotSystems: a pod talks to Redis once per tick
// whatever the number of its systems at scope fleet, in one pipeline of
// script calls that carry at most fleet.OpsPerCall ops each (Redis runs
// a script alone: a call of every system's ops would hold it long). 50
// busy systems (breaker and quota, each called 20 times a second, two
// ops a tick) cost Redis at most twice the commands a second of 1 busy
// system times the calls their ops need, per pod. The work of the
// systems' ops is Redis CPU all the same (each system's evidence and
// share is its own): the 50 systems cost less CPU per system than the 1
// system does, as their ops share the calls.
func TestRedisCostFollowsPodsNotSystems(t *testing.T) {
	t.Parallel()
	const pods = 5
	one := measureCost(t, costSetup{pods: pods, systems: 1, callsPerSec: 20, d: 3 * time.Second}).perPod(pods)
	many := measureCost(t, costSetup{pods: pods, systems: 50, callsPerSec: 20, d: 3 * time.Second}).perPod(pods)
	t.Logf("per pod, 1 system: %v", one)
	t.Logf("per pod, 50 systems: %v", many)
	t.Logf("50 systems / 1 system, per pod: commands x%.2f, Redis CPU x%.1f (x%.2f per system)",
		many.commands/one.commands, many.cpu/one.cpu, many.cpu/50/one.cpu)
	calls := float64((2*50 + fleet.OpsPerCall - 1) / fleet.OpsPerCall)
	if many.commands > 2*calls*one.commands {
		t.Errorf("50 systems cost %.1f commands a second per pod, 1 system %.1f: want at most %.0f times", many.commands, one.commands, 2*calls)
	}
	if many.cpu/50 > one.cpu {
		t.Errorf("50 systems cost %.0f µs of Redis CPU a second per pod, more per system than 1 system's %.0f µs", many.cpu, one.cpu)
	}
}
