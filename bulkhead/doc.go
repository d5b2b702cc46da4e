// Package bulkhead limits how many calls to one external system run at once.
//
// A [Bulkhead] is a per-system concurrency limit built on
// [golang.org/x/sync/semaphore.Weighted]. Every outbound call takes one
// permit before it starts and gives it back when it ends, so a slow or
// failing dependency can tie up at most Capacity goroutines instead of all
// of them. It sits on the hot path of every outbound HTTP call, so its fast
// paths do not allocate, start goroutines or arm timers.
//
// # Usage
//
//	b, err := bulkhead.New(32, 50*time.Millisecond)
//	if err != nil {
//		return err
//	}
//	...
//	if err := b.Acquire(ctx); err != nil {
//		return err // errors.Is(err, bulkhead.ErrFull) holds
//	}
//	defer b.Release()
//	return doCall(ctx)
//
// # Semantics
//
// [Bulkhead.Acquire] first tries to take a free permit without blocking.
// When none is free and the bulkhead was built with a maxWait of 0, it fails
// at once with [ErrFull]. Otherwise it queues (first in, first out) for at
// most maxWait, and never past the caller's context: a permit freed during
// the wait goes to the longest waiter. If maxWait passes first the error is
// exactly [ErrFull]; if the caller's context ends first the error matches
// both [ErrFull] and the context's error (context.Canceled or
// context.DeadlineExceeded) with [errors.Is], and also the context's cause
// when one was given with context.WithCancelCause and its relatives.
//
// A failed Acquire never holds a permit: the bulkhead is left as it was,
// apart from its refusal counter. Every failed Acquire and every false
// [Bulkhead.TryAcquire] counts as one refusal in [Bulkhead.Refused].
//
// [Bulkhead.Release] gives one permit back. Releasing more permits than were
// taken is a caller bug. The bulkhead detects it from its in-flight count
// once no permit is held, returns [ErrOverRelease] instead of panicking, and
// never lets its count drop below zero or rise above its capacity.
//
// # Adaptive limit
//
// [NewAdaptive] builds a bulkhead whose limit moves between a floor and
// its capacity (the ceiling) with the latency and failures its caller
// reports through [Bulkhead.Record], one report per call. It starts at
// the ceiling. Each window of calls (at least 10 calls and 100ms, and 4
// best latencies) compares the median latency with the best seen: the
// limit shrinks in proportion when the median passes 1.25 times the best
// (at most by half a window), or by half the ratio of failed calls, and
// grows by √limit while neither happens and at least half the limit was
// in flight; a limit less than half used comes down on latency only to
// twice the calls in flight. A best not seen again for 10s (1s after the
// first window, or after a probe that found a lower one) is re-measured
// by a window at half the limit. [Bulkhead.Limit] reports the current limit; everything
// else (ErrFull, the wait, Release) is as for a bulkhead of [New] whose
// capacity is that limit. A bulkhead of New pays nothing for this but a
// nil check in Release.
//
// # Observing a bulkhead
//
// [Bulkhead.InFlight] reports how many permits are held right now and
// [Bulkhead.Refused] how many acquisitions failed since [New]; both are
// plain atomic loads, cheap enough to export as metrics on every scrape.
//
// All methods of a Bulkhead are safe for concurrent use by multiple
// goroutines.
package bulkhead

import (
	"context"
	"errors"
)

// ErrFull is returned by [Bulkhead.Acquire] when no permit became free
// within the allowed wait. When the wait was cut short by the caller's
// deadline, the returned error wraps both ErrFull and the context's error;
// test for it with errors.Is(err, ErrFull). A wait the caller cancelled is
// not a full bulkhead: that error matches context.Canceled, not ErrFull.
var ErrFull = errors.New("bulkhead: full")

// ErrOverRelease is returned by [Bulkhead.Release] when it is called while no
// permit is held, that is more often than permits were taken. Such a call
// changes nothing.
var ErrOverRelease = errors.New("bulkhead: release without a held permit")

// errMaxWait is the private cause attached to the maxWait timer of a slow
// Acquire, so that "maxWait passed" can be told apart from "the caller's
// context ended" through context.Cause without comparing deadlines by hand.
var errMaxWait = errors.New("bulkhead: max wait elapsed")

// waitError is returned by Acquire when the caller's context ends while it
// waits for a permit. It matches the context's error and, when it differs,
// the context's cause; and ErrFull unless the caller cancelled.
type waitError struct {
	ctxErr error // ctx.Err(): context.Canceled or context.DeadlineExceeded
	cause  error // context.Cause(ctx); may equal ctxErr
}

// newWaitError builds the error for a wait ended by ctx.
func newWaitError(ctx context.Context) error {
	return &waitError{ctxErr: ctx.Err(), cause: context.Cause(ctx)}
}

// Error reports the refusal and why the wait ended.
func (e *waitError) Error() string {
	msg := ErrFull.Error() + ": wait ended: "
	if e.canceled() {
		msg = "bulkhead: wait canceled: "
	}
	if e.cause != nil && e.cause != e.ctxErr {
		return msg + e.ctxErr.Error() + ": " + e.cause.Error()
	}
	return msg + e.ctxErr.Error()
}

func (e *waitError) canceled() bool { return e.ctxErr == context.Canceled }

// Unwrap exposes ErrFull (unless the caller cancelled), the context's
// error and its cause to errors.Is and errors.As.
func (e *waitError) Unwrap() []error {
	errs := make([]error, 0, 3)
	if !e.canceled() {
		errs = append(errs, ErrFull)
	}
	errs = append(errs, e.ctxErr)
	if e.cause != nil && e.cause != e.ctxErr {
		errs = append(errs, e.cause)
	}
	return errs
}
