package fleet_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
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

// redisAt is a Redis the pods share: a *redistest.Server, or a
// *redistest.Cluster.
type redisAt interface{ URL() string }

var _, _ redisAt = (*redistest.Server)(nil), (*redistest.Cluster)(nil)

// startPods builds n pods calling baseURL with their breaker at scope
// "local" or "fleet" (in namespace ns of srv), with extra variables and
// registry options; a pod has a fleet when its breaker or its quota
// (PAYMENTS_RATE_SCOPE in extra) is at scope fleet.
func startPods(t *testing.T, n int, srv redisAt, ns, scope, baseURL string, extra map[string]string, opts ...registry.Option) []*pod {
	t.Helper()
	return startPodsTimed(t, podTimeout, n, srv, ns, scope, baseURL, extra, opts...)
}

// startPodsTimed is startPods with the pods' Config.Timeout timeout.
func startPodsTimed(t *testing.T, timeout time.Duration, n int, srv redisAt, ns, scope, baseURL string, extra map[string]string, opts ...registry.Option) []*pod {
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
		if scope == "fleet" || env["PAYMENTS_RATE_SCOPE"] == "fleet" {
			env["OUTBOUND_FLEET_REDIS_URL"], env["OUTBOUND_FLEET_NAMESPACE"] = srv.URL(), ns
			f, err := fleet.New(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: ns, Timeout: timeout})
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
			waitFor(t, syncWait, "in sync", func() bool { return p.fleet.Sync().Synced })
		}
	}
	return pods
}

var errStatus = errors.New("failed status")

type beganKey struct{}

// callBegan is when the call of ctx (made by get) began; zero for another.
func callBegan(ctx context.Context) time.Time {
	at, _ := ctx.Value(beganKey{}).(time.Time)
	return at
}

// get makes one call and reads the whole answer. The call's context
// carries when it began (callBegan), so that a test can tell a request
// its quota granted before a moment from one granted after.
func get(ctx context.Context, c *registry.Client) error {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, beganKey{}, time.Now()), 5*time.Second)
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

// podTimeout is the test pods' Config.Timeout, each round trip's bound:
// 1s rather than 100ms, so that a starved scheduler does not fail every
// round trip and leave the pods out of sync for good; what a short
// timeout does is the degraded and resync tests' to show.
const podTimeout = time.Second

// syncWait is how long a test waits for a fleet to reach Redis or for
// its shares to settle: long enough for a starved machine (the wait ends
// as soon as the condition holds; how long it took is not what the test
// judges).
const syncWait = 30 * time.Second

// starvedWait is how long a test waits for what the pace of its own
// callers sets (a breaker that opens once the callers sent enough
// failures, every pod seeing it open): a machine that starves the test
// binary runs its callers a few times a second. The wait ends as soon as
// the condition holds.
const starvedWait = 3 * syncWait

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

// callLoad is a run of calls for counting what the pods send Redis: every
// pod makes perPod calls spread over d (back to back when d is 0), and
// the run lasts d at least; a run with most set stops making calls once
// most has passed (a starved machine makes fewer calls, not a longer run).
type callLoad struct {
	pods   []*pod
	perPod int
	d      time.Duration
	most   time.Duration
	// settle is how long to wait after the run before counting, for the
	// last flush.
	settle time.Duration
}

// loadCount is what a callLoad cost Redis: the commands the pods sent,
// those the scripts ran inside Redis (scriptCommands, counted apart), how
// long the run took and how many calls it made.
type loadCount struct {
	sent, inside int
	elapsed      time.Duration
	calls        int
}

// commands runs l against srv's reset counters and counts what it cost.
func (l callLoad) commands(t *testing.T, srv *redistest.Server) loadCount {
	t.Helper()
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var made, refused atomic.Int64
	for _, p := range l.pods {
		wg.Go(func() {
			gap := l.d / time.Duration(l.perPod)
			for range l.perPod {
				if l.most > 0 && time.Since(start) >= l.most {
					return
				}
				switch err := get(context.Background(), p.c); {
				case errors.Is(err, registry.ErrRateLimited):
					// A starved pod's share may end before its next
					// grant: the quota refuses, which costs Redis
					// nothing either.
					refused.Add(1)
				case err != nil:
					t.Errorf("call: %v", err)
					return
				}
				made.Add(1)
				if gap > 0 {
					time.Sleep(gap)
				}
			}
		})
	}
	wg.Wait()
	if rest := l.d - time.Since(start); rest > 0 {
		time.Sleep(rest)
	}
	n := loadCount{elapsed: time.Since(start), calls: int(made.Load())}
	time.Sleep(l.settle)
	stats, err := srv.CommandCalls()
	if err != nil {
		t.Fatal(err)
	}
	for cmd, k := range stats {
		switch {
		case cmd == "info" || strings.HasPrefix(cmd, "config"): // the test's own
		case scriptCommands[cmd]:
			n.inside += k
		default:
			n.sent += k
		}
	}
	t.Logf("%d calls (%d refused by the quota) in %.1fs: %d commands sent, %d run inside scripts: %v", n.calls, refused.Load(), n.elapsed.Seconds(), n.sent, n.inside, stats)
	return n
}

// writeAlive writes n pods that do not exist alive in the count of the
// pods of namespace ns for life, as pods say they are alive (pace.go).
func writeAlive(srv *redistest.Server, ns string, n int, life time.Duration) error {
	words := []string{"ZADD", "outbound:fleet:{" + ns + "}:pods"}
	end := strconv.FormatInt(time.Now().Add(life).UnixMilli(), 10)
	for i := range n {
		words = append(words, end, "other"+strconv.Itoa(i))
	}
	_, err := srv.Do(words...)
	return err
}

// openTogether is how the pods' breakers opening together is judged: each
// pod calls once per openEvery until it sees its breaker open, and counts
// the calls it sent after the first pod of its system saw it open. A pod
// that applies the fleet's open state within openBound sends at most
// openBound of calls, and the one in flight, after the first. Counting
// calls rather than time judges what the pods sent: a starved machine
// slows the callers as much as it slows the fleet's messages.
const openEvery, openBound = 20 * time.Millisecond, 100 * time.Millisecond

// openCaller is one pod's client of one system, for openTogether.
type openCaller struct {
	system string
	c      *registry.Client
}

// callUntilOpen runs each caller until its breaker is open, or ctx ends,
// and returns the calls each sent after the first of its system saw the
// breaker open.
func callUntilOpen(ctx context.Context, callers []openCaller) []int {
	var mu sync.Mutex
	opened := map[string]bool{} // a pod has seen the system's breaker open
	late := make([]int, len(callers))
	var wg sync.WaitGroup
	for i, oc := range callers {
		wg.Go(func() {
			for ctx.Err() == nil && oc.c.Status().Breaker != observe.BreakerOpen {
				mu.Lock()
				after := opened[oc.system]
				mu.Unlock()
				if err := get(ctx, oc.c); after && !errors.Is(err, registry.ErrCircuitOpen) {
					late[i]++
				}
				time.Sleep(openEvery)
			}
			mu.Lock()
			opened[oc.system] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	return late
}

// checkOpenTogether fails t when a pod sent more calls after the first
// pod saw the breaker open than openBound allows.
func checkOpenTogether(t *testing.T, late []int) {
	t.Helper()
	want := int(openBound/openEvery) + 1
	t.Logf("calls each pod sent after the first pod saw the breaker open: %v", late)
	if most := slices.Max(late); most > want {
		t.Errorf("a pod sent %d calls after the first pod saw the breaker open, want at most %d (%v of calls, one per %v, and the one in flight)",
			most, want, openBound, openEvery)
	}
}
