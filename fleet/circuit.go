package fleet

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// circuit is the breaker of one system at scope fleet, standing in for
// the registry's own (local) breaker of that system. Every decision is
// local: one atomic load of the fleet's view when Redis is in sync, the
// local breaker's when it is not. It never talks to Redis; it counts
// outcomes in atomics that the fleet's loop flushes. A circuit is safe
// for concurrent use.
type circuit struct {
	f     *Fleet
	name  string
	base  string // key prefix of the system in Redis
	local registry.LocalBreaker
	judge func(error) observe.Verdict
	// report tells the registry's observers of each change of the
	// breaker's state (FleetSystem.States), forceReport of an override
	// learned from elsewhere (FleetSystem.Forces); nil: nobody listens.
	report      func(from, to observe.BreakerState)
	forceReport func(state observe.BreakerState, until time.Time)

	rule        atomic.Pointer[tripRule] // BREAKER_MIN_REQUESTS and BREAKER_FAILURE_RATIO (SetRule)
	window      time.Duration
	openTimeout time.Duration
	probes      int
	lease       time.Duration // a probe lease's life in Redis
	grantLife   time.Duration // how long a lease may start a probe

	view   atomic.Pointer[view]   // the fleet's state as this pod knows it
	grant  atomic.Pointer[grant]  // probe leases this pod holds
	forced atomic.Pointer[forced] // an operator's override, as this pod knows it

	reqs, fails atomic.Uint64 // judged attempts since the last flush
	want        atomic.Bool   // a call was refused for want of a lease
	restore     atomic.Bool   // Redis holds an older version than view
	leased      time.Time     // the last lease request (the loop's alone)

	// The observers' view (report.go): the state last reported, and the
	// local breaker's as its last change said.
	localState atomic.Int32 // a stateCode
	showMu     sync.Mutex   // orders the reports
	shown      atomic.Int32 // a stateCode, written under showMu

	mu       sync.Mutex
	results  []probeResult // probe outcomes not yet sent
	proposed int64         // the closed version this pod last asked to open
	totals   [2]uint64     // the fleet window's requests and failures, last read
	read     time.Time     // when totals were read
}

// tripRule is when the fleet's window trips the breaker open: at least
// min requests, ratio of them failed.
type tripRule struct {
	min   int
	ratio float64
}

// SetRule makes ratio and minRequests (BREAKER_FAILURE_RATIO and
// BREAKER_MIN_REQUESTS) the rule this pod judges the fleet's window by
// from its next sync on, when a change of the settings file changes
// them; the state and the window's counts stay. Pods that disagree for a
// moment (the change reaching them one by one) each judge by their own:
// the first whose rule the window breaks opens the breaker for every
// pod. It is called between calls, never on a call's path.
func (c *circuit) SetRule(ratio float64, minRequests int) {
	c.rule.Store(&tripRule{min: minRequests, ratio: ratio})
}

// view is one version of the fleet's state of a system: closed, or open
// until a time of this pod's clock (half-open after it).
type view struct {
	ver   int64
	open  bool
	until time.Time
}

// grant is the probe leases this pod took for one open version.
type grant struct {
	ver   int64
	until time.Time // no probe starts after this
	left  atomic.Int32
}

type probeResult struct {
	ver int64
	ok  bool
}

// errOpen and errProbesTaken are the fleet breaker's refusals (nothing
// sent): open, and half-open with every probe lease of this pod taken.
// Both match registry.ErrCircuitOpen.
var (
	errOpen        = fmt.Errorf("%w: open in the fleet", registry.ErrCircuitOpen)
	errProbesTaken = fmt.Errorf("%w: half-open in the fleet, every probe taken", registry.ErrCircuitOpen)
)

// Execute runs send through the fleet's state, then the local breaker.
func (c *circuit) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	if !c.f.synced.Load() {
		return c.local.Execute(send)
	}
	v := c.view.Load()
	if v.open {
		now := time.Now()
		if now.Before(v.until) {
			return nil, errOpen
		}
		c.showHalfOpen()
		return c.probe(v, now, send)
	}
	resp, err := c.local.Execute(send)
	switch c.judge(err) {
	case observe.VerdictSuccess:
		c.reqs.Add(1)
	case observe.VerdictFailure:
		c.reqs.Add(1)
		c.fails.Add(1)
		if c.localOpen() {
			c.f.wake() // this pod's breaker tripped: open the fleet's now
		}
	}
	return resp, err
}

// probe runs send as one of the fleet's half-open probes when this pod
// holds an unused lease of version v, and refuses it otherwise (asking the
// loop for a lease). The local breaker is bypassed: the fleet decides.
func (c *circuit) probe(v *view, now time.Time, send func() (*http.Response, error)) (*http.Response, error) {
	g := c.grant.Load()
	if g == nil || g.ver != v.ver || !now.Before(g.until) || !take(&g.left) {
		c.want.Store(true)
		c.f.wake()
		return nil, errProbesTaken
	}
	resp, err := send()
	switch c.judge(err) {
	case observe.VerdictSuccess, observe.VerdictFailure:
		c.mu.Lock()
		c.results = append(c.results, probeResult{ver: v.ver, ok: c.judge(err) == observe.VerdictSuccess})
		c.mu.Unlock()
		c.f.wake()
	default:
		g.left.Add(1) // neither: the lease may still probe
	}
	return resp, err
}

// take takes one from n if n > 0.
func take(n *atomic.Int32) bool {
	for {
		k := n.Load()
		if k <= 0 {
			return false
		}
		if n.CompareAndSwap(k, k-1) {
			return true
		}
	}
}

// localOpen reports whether the local breaker is open now.
func (c *circuit) localOpen() bool {
	st, _ := c.local.Breaker()
	return st == observe.BreakerOpen
}

// Breaker returns the fleet's state while in sync (open, or half-open
// once the open time has passed) when it is not closed, else the local
// breaker's; the counts are the local breaker's: this pod's window.
func (c *circuit) Breaker() (observe.BreakerState, observe.BreakerCounts) {
	st, n := c.local.Breaker()
	if c.f.synced.Load() {
		if v := c.view.Load(); v.open {
			if time.Now().Before(v.until) {
				return observe.BreakerOpen, n
			}
			c.showHalfOpen()
			return observe.BreakerHalfOpen, n
		}
	}
	return st, n
}

// FleetSync is the fleet's sync state, for the registry's Status.
func (c *circuit) FleetSync() observe.FleetSync {
	s := c.f.Sync()
	return observe.FleetSync{Synced: s.Synced, Since: s.Since, LastError: s.LastError, Malformed: s.Malformed, Capped: s.Capped}
}

// apply moves the view to st when st is newer. It reports whether st is
// older than the view: Redis lost what it had. A view at maxVersion takes
// any other version: the change after maxVersion is version 1.
func (c *circuit) apply(st state, now time.Time) (behind bool) {
	for {
		cur := c.view.Load()
		if st.ver == cur.ver {
			return false
		}
		if st.ver < cur.ver && cur.ver < maxVersion {
			return true
		}
		nv := &view{ver: st.ver, open: st.open}
		if st.open {
			nv.until = now.Add(st.left)
		}
		if c.view.CompareAndSwap(cur, nv) {
			return false
		}
	}
}
