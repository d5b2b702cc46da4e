package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Bulkhead limits the number of calls to one external system that run at
// the same time. Each call takes one permit with [Bulkhead.Acquire] or
// [Bulkhead.TryAcquire] and gives it back with [Bulkhead.Release].
//
// A Bulkhead must be created with [New]; the zero value is not usable. All
// its methods are safe for concurrent use by multiple goroutines, and a
// Bulkhead must not be copied after first use.
type Bulkhead struct {
	sem      *semaphore.Weighted
	capacity int64
	maxWait  time.Duration

	// inFlight counts permits held through this Bulkhead. It is raised only
	// after the semaphore granted a permit and lowered only before the permit
	// goes back to the semaphore, so it never exceeds the semaphore's own
	// count. Release uses it to refuse over-releases, which keeps
	// semaphore.Release from ever panicking.
	inFlight atomic.Int64
	refused  atomic.Uint64

	adaptive *adaptive // nil for a fixed bulkhead (New)
	fixed    held      // a fixed bulkhead's permits held above its limit (SetLimit)
}

// held is what a fixed bulkhead holds itself so that callers can take
// only its limit of its permits (SetLimit): those it parked, and those it
// owes, which Release keeps instead of giving back.
type held struct {
	mu     sync.Mutex // guards parked and changes of owed and limit
	parked int64
	owed   atomic.Int64
	limit  atomic.Int64 // 0: the capacity
}

// New returns a Bulkhead with capacity permits.
//
// maxWait is the longest time [Bulkhead.Acquire] waits for a permit when
// none is free; 0 means it rejects at once when the bulkhead is full.
// New returns an error, never panics, when capacity is less than 1 or
// maxWait is negative.
func New(capacity int64, maxWait time.Duration) (*Bulkhead, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("bulkhead: capacity must be at least 1, got %d", capacity)
	}
	if maxWait < 0 {
		return nil, fmt.Errorf("bulkhead: max wait must not be negative, got %v", maxWait)
	}
	return &Bulkhead{
		sem:      semaphore.NewWeighted(capacity),
		capacity: capacity,
		maxWait:  maxWait,
	}, nil
}

// Acquire takes one permit, waiting for at most the bulkhead's maxWait and
// never past ctx's end. On success the caller must call [Bulkhead.Release]
// exactly once when its call is done.
//
// When a permit is free, Acquire takes it at once without looking at ctx;
// this path does not allocate. When none is free:
//
//   - with a maxWait of 0, Acquire returns [ErrFull] at once;
//   - otherwise it waits in line. If maxWait passes first it returns
//     [ErrFull]; if ctx's deadline passes first it returns an error that
//     matches both [ErrFull] and ctx.Err() (and context.Cause(ctx) when
//     that differs) under [errors.Is]; if ctx is cancelled first, an
//     error that matches context.Canceled (and the cause), not ErrFull.
//
// If maxWait and ctx's end fall on the same instant, either error may be
// returned. On any error no permit is held and the bulkhead is unchanged
// except that [Bulkhead.Refused] grows by one. ctx must not be nil.
//
// Acquire is safe for concurrent use.
func (b *Bulkhead) Acquire(ctx context.Context) error {
	if b.sem.TryAcquire(1) {
		b.inFlight.Add(1)
		return nil
	}
	if b.maxWait == 0 {
		b.refused.Add(1)
		return ErrFull
	}
	return b.acquireSlow(ctx)
}

// acquireSlow waits for a permit for at most maxWait, bounded by ctx. It is
// kept out of Acquire so that the fast path stays small and free of the
// context and timer allocations made here.
func (b *Bulkhead) acquireSlow(ctx context.Context) error {
	wctx, cancel := context.WithTimeoutCause(ctx, b.maxWait, errMaxWait)
	defer cancel()

	// semaphore.Weighted.Acquire leaves the semaphore unchanged on error,
	// including when a permit was handed over just as wctx ended.
	err := b.sem.Acquire(wctx, 1)
	if err == nil {
		b.inFlight.Add(1)
		return nil
	}
	// wctx's cause is errMaxWait only if its own timer fired first; if ctx
	// ended first, wctx inherited ctx's cause instead.
	if errors.Is(context.Cause(wctx), errMaxWait) {
		b.refused.Add(1)
		return ErrFull
	}
	if ctx.Err() != context.Canceled {
		b.refused.Add(1) // the caller's deadline came before a permit
	}
	return newWaitError(ctx)
}

// TryAcquire takes one permit only if one is free right now, and reports
// whether it did. It never blocks and never allocates. A false result
// counts as one refusal in [Bulkhead.Refused]. On true the caller must
// call [Bulkhead.Release] exactly once when its call is done.
//
// TryAcquire does not jump the queue: while callers of [Bulkhead.Acquire]
// are waiting, it returns false.
//
// TryAcquire is safe for concurrent use.
func (b *Bulkhead) TryAcquire() bool {
	if b.sem.TryAcquire(1) {
		b.inFlight.Add(1)
		return true
	}
	b.refused.Add(1)
	return false
}

// Release gives back one permit taken by [Bulkhead.Acquire] or
// [Bulkhead.TryAcquire], handing it to the longest waiter if there is one.
// It returns nil on success.
//
// Calling Release more often than permits were taken is a bug in the
// caller. Release detects it when no permit is held at all: it then changes
// nothing, does not panic, and returns [ErrOverRelease]. An unmatched
// Release made while other callers still hold permits cannot be told apart
// from theirs; it frees one of their permits early, and the imbalance is
// reported by whichever Release later finds no permit held. Either way the
// bulkhead never holds fewer than zero or more than Capacity permits.
//
// Release is safe for concurrent use and does not allocate.
func (b *Bulkhead) Release() error {
	for {
		n := b.inFlight.Load()
		if n <= 0 {
			return ErrOverRelease
		}
		if b.inFlight.CompareAndSwap(n, n-1) {
			break
		}
	}
	if b.adaptive != nil && b.adaptive.keep() {
		return nil // parked: the limit fell while it was held
	}
	if b.adaptive == nil && b.fixed.keep() {
		return nil // parked: SetLimit lowered the limit while it was held
	}
	// The semaphore holds at least as many permits as inFlight counted,
	// plus one for each Release between its decrement and this call, so
	// this cannot underflow.
	b.sem.Release(1)
	return nil
}

// InFlight returns the number of permits currently held. Under concurrent
// use it is a snapshot that may already be stale, and it may briefly lag a
// permit granted a moment ago. It is safe for concurrent use.
func (b *Bulkhead) InFlight() int64 {
	return b.inFlight.Load()
}

// Capacity returns the number of permits the bulkhead was created with:
// for an adaptive bulkhead, the ceiling of its limit. It is safe for
// concurrent use.
func (b *Bulkhead) Capacity() int64 {
	return b.capacity
}

// MaxWait returns how long [Bulkhead.Acquire] waits for a permit when none
// is free; 0 means it does not wait. It is safe for concurrent use.
func (b *Bulkhead) MaxWait() time.Duration {
	return b.maxWait
}

// Refused returns the total number of refusals since [New]: every error
// returned by [Bulkhead.Acquire] and every false [Bulkhead.TryAcquire].
// It is safe for concurrent use.
func (b *Bulkhead) Refused() uint64 {
	return b.refused.Load()
}

// Rejected is [Bulkhead.Refused], under its first name.
//
// Deprecated: use [Bulkhead.Refused]; outbound says refused for a call
// not sent.
func (b *Bulkhead) Rejected() uint64 { return b.Refused() }

// SetLimit makes a bulkhead of [New] admit at most n calls at once, n
// from 1 to its capacity: a change of MAX_CONCURRENT while the service
// runs. A lower limit fails no call in flight: the bulkhead takes the
// free permits above it at once and keeps those above it that callers
// give back, so that no call is admitted until fewer than n are in
// flight. A higher one (up to the capacity) frees them again, waking
// waiters. It returns an error, changing nothing, for an n out of range
// or on an adaptive bulkhead, whose limit is its own. It is safe for
// concurrent use.
func (b *Bulkhead) SetLimit(n int64) error {
	if b.adaptive != nil {
		return errors.New("bulkhead: SetLimit on an adaptive bulkhead, whose limit adapts")
	}
	if n < 1 || n > b.capacity {
		return fmt.Errorf("bulkhead: the limit must be 1..%d (the capacity), got %d", b.capacity, n)
	}
	h := &b.fixed
	h.mu.Lock()
	defer h.mu.Unlock()
	want := b.capacity - n
	owed := h.owed.Load()
	switch have := h.parked + owed; {
	case want > have:
		for range want - have {
			if b.sem.TryAcquire(1) {
				h.parked++
			} else {
				owed++
			}
		}
	case want < have:
		give := have - want
		forgiven := min(owed, give)
		owed -= forgiven
		if give -= forgiven; give > 0 {
			h.parked -= give
			b.sem.Release(give)
		}
	}
	h.owed.Store(owed)
	h.limit.Store(n)
	return nil
}

// keep parks a permit given back while the bulkhead owes one, and
// reports whether it did: one atomic load while nothing is owed.
func (h *held) keep() bool {
	if h.owed.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if owed := h.owed.Load(); owed > 0 {
		h.owed.Store(owed - 1)
		h.parked++
		return true
	}
	return false
}
