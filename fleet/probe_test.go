package fleet_test

import (
	"context"
	"fmt"
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
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// TestFailingHalfOpenRoundsSendTheirProbesFleetWide: 5 pods call an
// upstream that fails, HALF_OPEN_PROBES=2: every failing half-open round
// sends at most 2 probes across the fleet (5 local breakers would send
// 10), a round sends 2 when its pods call, and the fleet closes once the
// upstream is healthy.
//
// Each request says which pod sent it, and is counted by what that pod
// held when the upstream got it: a request of a pod in sync whose view is
// half-open is a probe of that view's open version (its round), however
// late the pod sends it. A request of a pod out of sync (Redis slower
// than the pod's Timeout: the pod is local, by design) is not a round's,
// nor is one of a pod whose view or sync changed between the call's
// start and its arrival (the circuit admitted it by a view the count
// cannot know): both are counted apart.
func TestFailingHalfOpenRoundsSendTheirProbesFleetWide(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var healthy atomic.Bool
	var pods []*pod
	calls := &probeCalls{rounds: map[int64]int{}}
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i, err := strconv.Atoi(r.Header.Get(podHeader)); err == nil {
			calls.count(pods, i, time.Now())
		}
		time.Sleep(20 * time.Millisecond)
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	pods = startPods(t, 5, srv, "probes", "fleet", up.URL, map[string]string{
		"PAYMENTS_BREAKER_MIN_REQUESTS": "5", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "400ms", "PAYMENTS_BREAKER_HALF_OPEN_PROBES": "2",
	})
	calls.before = make([]fleet.Seen, len(pods))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			for ctx.Err() == nil {
				calls.begin(pods, i)
				getAs(ctx, p.c, i)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	waitFor(t, syncWait, "fleet open", func() bool { return pods[0].c.Status().Breaker == observe.BreakerOpen })
	openedAt := time.Now()
	// About 3 half-open rounds, all failing: 1.5s, and on until one round
	// has sent its 2 probes (a starved caller may leave a lease unused in
	// a round, and a starved machine run fewer rounds), at most syncWait.
	waitFor(t, syncWait, "a failing round with 2 probes", func() bool {
		calls.mu.Lock()
		defer calls.mu.Unlock()
		return time.Since(openedAt) >= 1500*time.Millisecond && len(calls.rounds) >= 2 && slices.Max(slices.Collect(maps.Values(calls.rounds))) >= 2
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
	calls.mu.Lock()
	defer calls.mu.Unlock()
	t.Logf("probes per half-open round (open version: probes), fleet-wide: %v; %d calls of pods not half-open, %d of pods out of sync, %d of pods that had not heard of the round, %d of pods whose view moved while the call was admitted",
		calls.rounds, calls.ordinary, calls.local, calls.lagging, calls.moved)
	// The leases bound each round at 2 probes however the pods are run.
	bad := false
	for _, ver := range slices.Sorted(maps.Keys(calls.rounds)) {
		if n := calls.rounds[ver]; n > 2 {
			bad = true
			t.Errorf("round of open version %d: %d probes fleet-wide, want at most 2 (5 local breakers would send 10)", ver, n)
		}
	}
	if bad {
		t.Logf("the calls the upstream got after the fleet opened:\n%s", calls.describe(openedAt))
	}
}

// podHeader says which pod sent a request.
const podHeader = "X-Test-Pod"

// getAs is get, with the request saying it is pod i's.
func getAs(ctx context.Context, c *registry.Client, i int) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/pay", nil)
	if err != nil {
		return
	}
	req.Header.Set(podHeader, strconv.Itoa(i))
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
	}
}

// probeCalls counts the requests the upstream got by the round of the
// pod that sent each.
type probeCalls struct {
	mu       sync.Mutex
	before   []fleet.Seen  // what each pod held when its call began
	rounds   map[int64]int // open version -> probes sent in its half-open time
	ordinary int           // calls of pods in sync whose view is closed, or open and not yet half-open
	local    int           // calls of pods out of sync
	lagging  int           // calls of pods that had not heard of the newest half-open round
	moved    int           // calls of pods whose view or sync changed while the call was admitted
	hits     []probeHit
}

// probeHit is one request the upstream got: when, from which pod, what
// the pod held then, and how it was counted.
type probeHit struct {
	at   time.Time
	pod  int
	seen fleet.Seen
	as   string
}

// begin records what pod i holds as its call begins (a pod makes one
// call at a time).
func (pc *probeCalls) begin(pods []*pod, i int) {
	s := pods[i].fleet.Seen("payments")
	pc.mu.Lock()
	pc.before[i] = s
	pc.mu.Unlock()
}

// count counts a request of pod i that reached the upstream at now.
func (pc *probeCalls) count(pods []*pod, i int, now time.Time) {
	own := pods[i].fleet.Seen("payments")
	newest := own
	for _, p := range pods {
		if s := p.fleet.Seen("payments"); s.Ver > newest.Ver {
			newest = s
		}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	h := probeHit{at: now, pod: i, seen: own}
	switch {
	case own != pc.before[i]:
		pc.moved++
		h.as = "moved"
	case !own.Synced:
		pc.local++
		h.as = "local"
	case own.HalfOpen(now):
		pc.rounds[own.Ver]++
		h.as = "probe"
	case own.Ver < newest.Ver && newest.Open && !now.Before(newest.Until):
		pc.lagging++
		h.as = "lagging"
	default:
		pc.ordinary++
		h.as = "ordinary"
	}
	pc.hits = append(pc.hits, h)
}

// describe lists the requests after from, one a line.
func (pc *probeCalls) describe(from time.Time) string {
	var b strings.Builder
	for _, h := range pc.hits {
		if h.at.Before(from) {
			continue
		}
		fmt.Fprintf(&b, "  +%4dms pod %d %-8s synced=%v v%d", h.at.Sub(from).Milliseconds(), h.pod, h.as, h.seen.Synced, h.seen.Ver)
		if h.seen.Open {
			fmt.Fprintf(&b, " open, half-open %+dms", h.at.Sub(h.seen.Until).Milliseconds())
		} else {
			b.WriteString(" closed")
		}
		b.WriteByte('\n')
	}
	return b.String()
}
