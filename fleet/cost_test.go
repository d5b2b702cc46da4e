package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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
// once the pods have settled.
type costSetup struct {
	pods, systems int
	callsPerSec   int
	d             time.Duration
}

// cost is what a setup cost Redis, per second of the run.
type cost struct {
	scripts  float64 // script calls (EVALSHA, EVAL, FCALL)
	commands float64 // every command the pods sent
	usec     float64 // Redis CPU in those commands (commandstats), µs
	cpu      float64 // Redis process CPU (INFO cpu), µs
	calls    float64 // calls made through the registries
}

func (c cost) String() string {
	return fmt.Sprintf("%.0f scripts/s, %.0f commands/s, %.0f µs/s in commands, %.0f µs/s process CPU (%.0f calls/s)",
		c.scripts, c.commands, c.usec, c.cpu, c.calls)
}

// perPod is c divided among pods.
func (c cost) perPod(pods int) cost {
	n := float64(pods)
	return cost{c.scripts / n, c.commands / n, c.usec / n, c.cpu / n, c.calls / n}
}

// scriptCalls are the commands that run a script.
var scriptCalls = map[string]bool{"evalsha": true, "eval": true, "evalsha_ro": true, "eval_ro": true, "fcall": true, "fcall_ro": true}

// costPods starts s.pods registries of s.systems systems at scope fleet
// on srv, each call answered in memory.
func costPods(t *testing.T, srv *redistest.Server, ns string, s costSetup) []*registry.Registry {
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
func measureCost(t *testing.T, s costSetup) cost {
	t.Helper()
	srv := redistest.Start(t)
	regs := costPods(t, srv, "cost", s)
	time.Sleep(2 * time.Second) // the shares settle, the pods join
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
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
	before := redisCost(t, srv, true)
	start := time.Now()
	time.Sleep(s.d)
	after := redisCost(t, srv, false)
	secs := time.Since(start).Seconds()
	cancel()
	wg.Wait()
	c := cost{
		scripts: after.scripts / secs, commands: after.commands / secs, usec: after.usec / secs,
		cpu: (after.cpu - before.cpu) / secs, calls: float64(calls) / secs,
	}
	return c
}

// redisCost reads srv's counts: commands since the last reset (and resets
// them when reset is set), and the process's CPU since it started.
func redisCost(t *testing.T, srv *redistest.Server, reset bool) cost {
	t.Helper()
	var c cost
	if reset {
		if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
	} else {
		stats, err := srv.CommandStats()
		if err != nil {
			t.Fatal(err)
		}
		for name, st := range stats {
			switch {
			case name == "info" || strings.HasPrefix(name, "config") || scriptCommands[name]:
				// the test's own, or run inside a script (counted in its usec)
			default:
				c.commands += float64(st.Calls)
				c.usec += float64(st.Usec)
				if scriptCalls[name] {
					c.scripts += float64(st.Calls)
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

// TestRedisCostFigures measures what 50 systems at scope fleet (breaker
// and quota) cost Redis on 5 and on 20 pods, idle and busy (every system
// called 20 times a second on every pod), and extrapolates the cost per
// pod to 1,000 pods: the figures of docs/fleet-redis.md. It takes about a
// minute: it runs when OUTBOUND_FLEET_COST=1, without -race for figures
// that are the Redis server's alone:
//
//	OUTBOUND_FLEET_COST=1 go test -run TestRedisCostFigures -v ./fleet/
func TestRedisCostFigures(t *testing.T) {
	if os.Getenv("OUTBOUND_FLEET_COST") != "1" {
		t.Skip("set OUTBOUND_FLEET_COST=1 to measure what the fleet costs Redis (about a minute)")
	}
	const systems = 50
	per := map[string]cost{}
	for _, busy := range []bool{false, true} {
		for _, pods := range []int{5, 20} {
			s := costSetup{pods: pods, systems: systems, d: 8 * time.Second}
			load := "idle"
			if busy {
				s.callsPerSec, load = 20, "busy"
			}
			name := fmt.Sprintf("%s/%dpods", load, pods)
			t.Run(name, func(t *testing.T) {
				c := measureCost(t, s)
				per[name] = c.perPod(pods)
				t.Logf("%d pods x %d systems, %s: %v", pods, systems, load, c)
				t.Logf("per pod: %v", per[name])
			})
		}
	}
	for _, load := range []string{"idle", "busy"} {
		p5, p20 := per[load+"/5pods"], per[load+"/20pods"]
		// The cost per pod as a line through the two sizes: a cost that
		// grows with the fleet shows in its slope.
		at := func(a, b float64) float64 { return a + (b-a)/15*(1000-5) }
		t.Logf("%s, per pod: 5 pods %.0f µs/s (%.0f process), 20 pods %.0f µs/s (%.0f process); 1,000 pods x %d systems, extrapolated: %.2f cores in commands, %.2f cores of process CPU",
			load, p5.usec, p5.cpu, p20.usec, p20.cpu, systems, at(p5.usec, p20.usec)*1000/1e6, at(p5.cpu, p20.cpu)*1000/1e6)
	}
}
