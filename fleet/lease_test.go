package fleet

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// TestHalfOpenProbesLeasedFleetWide: 5 pods, HALF_OPEN_PROBES=2, call a
// dead upstream; after 1.5s it is healthy again. The pods have all seen
// the fleet open before they call. Every call that reaches the upstream
// from a pod whose view is half-open (open, and its open time has
// passed) counts against that round, whether a leased probe or not: no
// round sends more than 2 across the fleet, and the round that closes
// sends exactly 2. A call of a pod out of sync (Redis slow under load:
// the pod is local), or of one that has not yet heard of the round the
// newest view of any pod says is half-open (a starved pod reads the
// message late), is not the round's and is counted apart, as is one whose
// pod's view or sync changed between the call's start and its send (a
// starved goroutine may be put off that long): the circuit admitted it
// by a view the count cannot know.
func TestHalfOpenProbesLeasedFleetWide(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := testSettings
	s.openTimeout = 300 * time.Millisecond
	var pods []*circuit
	for range 5 {
		f, c := newPod(t, srv, "probes", s)
		waitFor(t, syncWait, "sync", f.synced.Load)
		pods = append(pods, c)
	}
	r, err := runOp(pods[0], tripOf(0))
	if err != nil || r[0] != 1 {
		t.Fatalf("trip: %v %v", r, err)
	}
	for _, c := range pods {
		waitFor(t, syncWait, "every pod open", func() bool { return c.view.Load().ver == 1 })
	}
	calls := &roundCalls{pods: pods, probes: map[int64]int{}}
	healthy := atomic.Bool{}
	send := func(c *circuit, before podSeen) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			calls.count(c, before)
			time.Sleep(30 * time.Millisecond)
			if healthy.Load() {
				return &http.Response{StatusCode: 200}, nil
			}
			return nil, errUpstream
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range pods {
		wg.Go(func() {
			for ctx.Err() == nil {
				c.Execute(send(c, seenOf(c)))
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	// The upstream stays dead for 1.5s and 3 half-open rounds at least (a
	// starved machine runs fewer rounds in 1.5s), at most syncWait.
	dead := time.Now()
	waitFor(t, syncWait, "3 half-open rounds", func() bool {
		calls.mu.Lock()
		defer calls.mu.Unlock()
		return len(calls.probes) >= 3 && time.Since(dead) >= 1500*time.Millisecond
	})
	healthy.Store(true)
	waitFor(t, syncWait, "fleet closed", func() bool {
		for _, c := range pods {
			if v := c.view.Load(); v.open {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	calls.mu.Lock()
	defer calls.mu.Unlock()
	probes := calls.probes
	closedAt := pods[0].view.Load().ver // the closed version; its round was ver-1
	t.Logf("calls per half-open round: %v (closed at v%d); %d calls closed, %d out of sync, %d of pods that had not heard of the round, %d of pods whose view moved while the call was admitted",
		probes, closedAt, calls.ordinary, calls.local, calls.lagging, calls.moved)
	for ver, n := range probes {
		if n > s.probes {
			t.Errorf("open version %d: %d calls in its half-open time fleet-wide, want <= %d", ver, n, s.probes)
		}
	}
	if got := probes[closedAt-1]; got != s.probes {
		t.Errorf("the round that closed sent %d probes, want %d", got, s.probes)
	}
}

// roundCalls counts the calls that reach the upstream by the round of
// the fleet they fall in.
type roundCalls struct {
	pods []*circuit

	mu       sync.Mutex
	probes   map[int64]int // open version -> calls in its half-open time
	ordinary int           // calls while the fleet is closed (or open, not yet half-open)
	local    int           // calls of a pod out of sync
	lagging  int           // calls of a pod that had not heard of the half-open round yet
	moved    int           // calls of a pod whose view or sync changed while the call was admitted
}

// podSeen is what a pod's circuit held when a call began: the call was
// admitted by it if it still holds it when the call is sent.
type podSeen struct {
	synced bool
	view   *view
}

func seenOf(c *circuit) podSeen { return podSeen{c.f.synced.Load(), c.view.Load()} }

// count counts a call of pod c sent now against the round c's own view
// says is half-open (a probe of a round c may have missed the end of), or
// apart when c is out of sync, has not heard of the round the newest view
// of any pod says is half-open, or held another view or sync when the
// call began (before).
func (r *roundCalls) count(c *circuit, before podSeen) {
	now, own, fleet := time.Now(), seenOf(c), newest(r.pods)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case own != before:
		r.moved++
	case !own.synced:
		r.local++
	case own.view.open && !now.Before(own.view.until):
		r.probes[own.view.ver]++
	case own.view.ver < fleet.ver && fleet.open && !now.Before(fleet.until):
		// c has not yet heard of the round (a starved pod reads the
		// message late): its call is not a probe of a round it knows of.
		r.lagging++
	default:
		r.ordinary++
	}
}

// newest is the newest view any pod holds: the fleet's state as near as
// the pods know it.
func newest(pods []*circuit) *view {
	v := pods[0].view.Load()
	for _, c := range pods[1:] {
		if w := c.view.Load(); w.ver > v.ver {
			v = w
		}
	}
	return v
}

// TestLeaseOutlivesEveryProbeItsGrantAdmits: a lease is taken in Redis
// when the round trip that asks for it arrives, after it was sent; its
// reply may come late on a slow machine. A probe starts before the
// grant ends and runs at most CALL_TIMEOUT, so the lease must last until
// the grant's end plus CALL_TIMEOUT, counted from the request: a lease
// that expired under a running probe would let another pod take it, one
// probe more in the round.
func TestLeaseOutlivesEveryProbeItsGrantAdmits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := testSettings
		s.openTimeout, s.callTimeout = 300*time.Millisecond, 2*time.Second
		c := bare(s)
		sent := time.Now()
		c.apply(state{ver: 5, open: true}, sent)
		time.Sleep(250 * time.Millisecond) // the reply is late
		c.applyLease(state{ver: 5, open: true}, []int64{1}, &roundTrip{sent: sent}, time.Now())
		g := c.grant.Load()
		if g == nil {
			t.Fatal("no grant")
		}
		if last := g.until.Sub(sent) + s.callTimeout; last > c.lease {
			t.Errorf("a probe may run until %v after the request, the lease lasts %v", last, c.lease)
		}
	})
}

// TestGrantEndsBeforeAnotherRoundCanBegin: a pod holds a lease of round 5
// and misses the messages: round 5 ended (another pod's probe failed)
// and round 6 opened, then turned half-open BREAKER_OPEN_TIMEOUT later.
// Its grant must be over by then, or its probe of round 5 would reach the
// upstream in round 6's half-open time, beside round 6's own probes.
func TestGrantEndsBeforeAnotherRoundCanBegin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := testSettings
		s.openTimeout, s.callTimeout = 300*time.Millisecond, 2*time.Second
		c := bare(s)
		c.apply(state{ver: 5, open: true}, time.Now())
		sent := time.Now() // round 6 can open no sooner than Redis took this lease
		c.applyLease(state{ver: 5, open: true}, []int64{1}, &roundTrip{sent: sent}, time.Now())
		time.Sleep(s.openTimeout) // round 6's half-open begins, at the soonest
		sentProbe := false
		_, err := c.Execute(func() (*http.Response, error) { sentProbe = true; return nil, errUpstream })
		if sentProbe || !errors.Is(err, errProbesTaken) {
			t.Errorf("a grant of round 5 %v after its request: probe sent %v (%v), want refused", s.openTimeout, sentProbe, err)
		}
	})
}
