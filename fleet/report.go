package fleet

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// This file tells the registry's observers of every change of a fleet
// breaker's State, whatever caused it: the local breaker (tripping,
// probing), the fleet (another pod tripped it, the open time passed, a
// probe closed it) or Redis (degraded, every breaker local; in sync
// again). Each change is told once, in order, on every pod, from the
// goroutine that made or saw it: the local breaker's hook, a call, the
// loop, the listener, Close.

// ReportStates implements registry.StateReporter: report is the registry's
// hook to its observers; the local breaker's changes come back through
// the function returned. It is called before any call, but the loop may
// already run: report is an atomic.
func (c *circuit) ReportStates(report func(from, to gobreaker.State)) func(from, to gobreaker.State) {
	if report != nil {
		c.report.Store(&report)
	}
	return c.localChanged
}

// localChanged is the local breaker's hook. It runs while the local
// breaker holds its lock: it reads the state it is given, never the
// breaker's.
func (c *circuit) localChanged(_, to gobreaker.State) {
	c.localState.Store(int32(to))
	if c.report.Load() == nil {
		return
	}
	c.showMu.Lock()
	c.showLocked(time.Now())
	c.showMu.Unlock()
}

// show tells the observers of a change of State since the last one told.
// The local breaker is read first, outside showMu, so that its own lazy
// change (open to half-open once its timeout passed) comes in through its
// hook, as gobreaker makes it when read.
func (c *circuit) show() {
	if c.report.Load() == nil {
		return
	}
	c.local.State()
	c.showMu.Lock()
	c.showLocked(time.Now())
	c.showMu.Unlock()
}

// showHalfOpen is show on the path of a call or a State that found the
// fleet's open time passed: one atomic load unless the change is news.
func (c *circuit) showHalfOpen() {
	if gobreaker.State(c.shown.Load()) != gobreaker.StateHalfOpen && c.report.Load() != nil {
		c.show()
	}
}

// showLocked reports the state at now if it is not the one last reported.
func (c *circuit) showLocked(now time.Time) {
	from, to := gobreaker.State(c.shown.Load()), c.stateAt(now)
	if to == from {
		return
	}
	c.shown.Store(int32(to))
	(*c.report.Load())(from, to)
}

// stateAt is State at now, with the local breaker's state as its last
// change said (State reads the breaker itself).
func (c *circuit) stateAt(now time.Time) gobreaker.State {
	if c.f.synced.Load() {
		if v := c.view.Load(); v.open {
			if now.Before(v.until) {
				return gobreaker.StateOpen
			}
			return gobreaker.StateHalfOpen
		}
	}
	return gobreaker.State(c.localState.Load())
}

// showAll runs show for every system of the fleet: after a round trip
// (the state read back, the open time passed) and when the sync state
// changed.
func (f *Fleet) showAll() {
	for _, c := range f.snapshot() {
		c.show()
	}
}
