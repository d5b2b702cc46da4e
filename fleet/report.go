package fleet

import (
	"time"

	"github.com/outbound-go/outbound/observe"
)

// This file tells the registry's observers of every change of a fleet
// breaker's state, whatever caused it: the local breaker (tripping,
// probing), the fleet (another pod tripped it, the open time passed, a
// probe closed it) or Redis (degraded, every breaker local; in sync
// again). Each change is told once, in order, on every pod, from the
// goroutine that made or saw it: the local breaker's hook, a call, the
// loop, the listener, Close.

// stateCode is a breaker state in an atomic.
type stateCode int32

const (
	codeClosed stateCode = iota
	codeHalfOpen
	codeOpen
)

func codeOf(s observe.BreakerState) stateCode {
	switch s {
	case observe.BreakerOpen:
		return codeOpen
	case observe.BreakerHalfOpen:
		return codeHalfOpen
	}
	return codeClosed
}

func (s stateCode) state() observe.BreakerState {
	switch s {
	case codeOpen:
		return observe.BreakerOpen
	case codeHalfOpen:
		return observe.BreakerHalfOpen
	}
	return observe.BreakerClosed
}

// LocalChanged is the local breaker's hook (registry.SharedBreaker). It
// runs while the local breaker holds its lock: it reads the state it is
// given, never the breaker's.
func (c *circuit) LocalChanged(_, to observe.BreakerState) {
	c.localState.Store(int32(codeOf(to)))
	if c.report == nil {
		return
	}
	c.showMu.Lock()
	c.showLocked(time.Now())
	c.showMu.Unlock()
}

// show tells the observers of a change of state since the last one told.
// The local breaker is read first, outside showMu, so that its own lazy
// change (open to half-open once its timeout passed) comes in through its
// hook, as gobreaker makes it when read.
func (c *circuit) show() {
	if c.report == nil {
		return
	}
	c.local.Breaker()
	c.showMu.Lock()
	c.showLocked(time.Now())
	c.showMu.Unlock()
}

// showHalfOpen is show on the path of a call or a Breaker that found the
// fleet's open time passed: one atomic load unless the change is news.
// It does not wait for showMu: an observer told of a change (under
// showMu) may read Breaker, and a report under way is followed by the
// loop's next showAll.
func (c *circuit) showHalfOpen() {
	if c.report == nil || stateCode(c.shown.Load()) == codeHalfOpen || !c.showMu.TryLock() {
		return
	}
	c.showLocked(time.Now())
	c.showMu.Unlock()
}

// showLocked reports the state at now if it is not the one last reported.
func (c *circuit) showLocked(now time.Time) {
	from, to := stateCode(c.shown.Load()), c.stateAt(now)
	if to == from {
		return
	}
	c.shown.Store(int32(to))
	c.report(from.state(), to.state())
}

// stateAt is the state at now, with the local breaker's as its last
// change said (Breaker reads the breaker itself).
func (c *circuit) stateAt(now time.Time) stateCode {
	if c.f.synced.Load() {
		if v := c.view.Load(); v.open {
			if now.Before(v.until) {
				return codeOpen
			}
			return codeHalfOpen
		}
	}
	return stateCode(c.localState.Load())
}

// showAll runs show for every system of the fleet: after a round trip
// (the state read back, the open time passed) and when the sync state
// changed.
func (f *Fleet) showAll() {
	for _, c := range f.snapshot() {
		c.show()
	}
}
