package bulkhead

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Option configures a bulkhead built by [NewAdaptive].
type Option interface {
	apply(*adaptive)
}

type optionFunc func(*adaptive)

func (f optionFunc) apply(a *adaptive) { f(a) }

// OnLimitChange sets a function called each time the adaptive limit
// changes, with the limit before and after. It is called while the
// bulkhead holds its lock, on the goroutine of the [Bulkhead.Record] that
// closed a window: it must be quick and must not call back into the
// bulkhead.
func OnLimitChange(f func(from, to int64)) Option {
	return optionFunc(func(a *adaptive) { a.onChange = f })
}

// adaptive is the state of an adaptive bulkhead. The semaphore always has
// ceiling permits; the bulkhead holds (parks) those above the limit
// itself, so that callers can take only limit of them, with the same
// queue, wait and errors as a fixed bulkhead.
type adaptive struct {
	mu     sync.Mutex // guards lim and parked, and changes of owed
	lim    limiter
	parked int64 // permits the bulkhead holds itself

	// owed is how many more permits the bulkhead must park: a lower
	// limit takes free permits at once and owes those callers hold,
	// which Release keeps instead of giving back.
	owed  atomic.Int64
	limit atomic.Int64 // lim.current(), for Limit without the lock

	onChange func(from, to int64)
}

// NewAdaptive returns a Bulkhead whose limit adapts between floor and
// ceiling to the latency and the failures reported by [Bulkhead.Record].
// It starts at ceiling, as a fixed bulkhead of that capacity would, and
// moves once a window of calls shows queueing (the latency rising above
// the best seen) or failures; see the package doc for the rule.
//
// Acquire, TryAcquire and Release behave as for a bulkhead of [New]
// whose capacity is the current limit: beyond it calls are refused with
// [ErrFull] or wait at most maxWait. [Bulkhead.Capacity] is the ceiling.
// NewAdaptive returns an error, never panics, unless 1 <= floor <=
// ceiling and maxWait >= 0.
func NewAdaptive(floor, ceiling int64, maxWait time.Duration, opts ...Option) (*Bulkhead, error) {
	if floor < 1 || floor > ceiling {
		return nil, fmt.Errorf("bulkhead: the floor must be 1..ceiling (%d), got %d", ceiling, floor)
	}
	b, err := New(ceiling, maxWait)
	if err != nil {
		return nil, err
	}
	a := &adaptive{lim: newLimiter(floor, ceiling)}
	for _, o := range opts {
		o.apply(a)
	}
	a.limit.Store(a.lim.current())
	b.adaptive = a
	return b, nil
}

// Record tells an adaptive bulkhead how a call that held a permit went:
// when it started, so that its latency is the time since (the caller
// chooses what it measures, the same way for every call), and whether it
// failed in a way that may mean overload (a timeout, a transport error,
// a 503). A call the caller cancelled tells
// nothing about the upstream: do not record it. Record may be called
// before or after the call's Release, once per call. On a bulkhead of
// [New] it does nothing.
//
// Record is safe for concurrent use. It reads the clock once, takes a
// lock and does not allocate.
func (b *Bulkhead) Record(start time.Time, failed bool) {
	a := b.adaptive
	if a == nil {
		return
	}
	now := time.Now() // one clock read: the latency's end and the window's
	a.mu.Lock()
	defer a.mu.Unlock()
	from := a.lim.current()
	if !a.lim.observe(now, now.Sub(start), b.inFlight.Load(), failed) {
		return
	}
	b.park(b.capacity - a.lim.enforced())
	if to := a.lim.current(); to != from {
		a.limit.Store(to)
		if a.onChange != nil {
			a.onChange(from, to)
		}
	}
}

// park makes the bulkhead hold want permits itself: it takes free ones
// at once and owes the rest, or gives back what it holds or owes beyond
// want. Called with a.mu held.
func (b *Bulkhead) park(want int64) {
	a := b.adaptive
	owed := a.owed.Load()
	switch have := a.parked + owed; {
	case want > have:
		for range want - have {
			if b.sem.TryAcquire(1) {
				a.parked++
			} else {
				owed++
			}
		}
	case want < have:
		give := have - want
		forgiven := min(owed, give)
		owed -= forgiven
		if give -= forgiven; give > 0 {
			a.parked -= give
			b.sem.Release(give)
		}
	}
	a.owed.Store(owed)
}

// keep parks the permit a caller gives back if the bulkhead owes one,
// and reports whether it did. It is Release's one extra step on an
// adaptive bulkhead, and costs an atomic load while nothing is owed.
func (a *adaptive) keep() bool {
	if a.owed.Load() == 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if owed := a.owed.Load(); owed > 0 {
		a.owed.Store(owed - 1)
		a.parked++
		return true
	}
	return false
}

// Limit returns how many calls the bulkhead admits at once: the adaptive
// limit's current value, or the capacity of a bulkhead of [New]. After
// the limit falls, [Bulkhead.InFlight] may exceed it until enough calls
// end; during a probe window the bulkhead admits only half of it. It is
// safe for concurrent use.
func (b *Bulkhead) Limit() int64 {
	if b.adaptive == nil {
		if n := b.fixed.limit.Load(); n > 0 {
			return n
		}
		return b.capacity
	}
	return b.adaptive.limit.Load()
}

// Adaptive reports whether the bulkhead was built by [NewAdaptive].
func (b *Bulkhead) Adaptive() bool { return b.adaptive != nil }
