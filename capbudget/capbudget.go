package capbudget

import (
	"context"
	"math"
	"time"
)

// Cap returns a context whose deadline is
//
//	min(now + callTimeout, callerDeadline - DefaultReserve)
//
// together with its cancel function, which the caller must call once the
// outbound call is over. It is CapWith(ctx, callTimeout, DefaultReserve);
// see [CapWith] for the exact rules and causes.
func Cap(ctx context.Context, callTimeout time.Duration) (context.Context, context.CancelFunc) {
	return CapWith(ctx, callTimeout, DefaultReserve)
}

// CapWith is [Cap] with an explicit reserve, the time kept back from the
// caller's deadline. A negative reserve is treated as 0. The returned
// context is derived from ctx, and the returned cancel function must be
// called to release its resources.
//
// The rules, in order:
//
//   - If ctx is already done, the returned context is done too and keeps
//     ctx's own error and cause (for example [context.Canceled]).
//   - If ctx has no deadline, the deadline is now+callTimeout with cause
//     [ErrCallTimeout]. If also callTimeout <= 0, nothing bounds the result
//     but ctx's own cancellation.
//   - Otherwise let remaining = callerDeadline - now - reserve.
//     If remaining <= 0, the returned context is already done: its Err is
//     [context.DeadlineExceeded], its [context.Cause] is [ErrExhausted], and
//     no timer is started.
//     If callTimeout <= 0 (no per-call bound) or remaining < callTimeout,
//     the deadline is callerDeadline-reserve (= now+remaining) with cause
//     [ErrExhausted].
//     Otherwise (remaining >= callTimeout) the deadline is now+callTimeout
//     with cause [ErrCallTimeout].
//
// The result never ends later than ctx: a sooner caller deadline always
// wins, and cancelling ctx cancels the result with ctx's cause. With a
// reserve of 0 and remaining < callTimeout the capped deadline equals the
// caller's, and which of the two timers fires first decides whether the
// cause is [ErrExhausted] or ctx's own cause ([context.DeadlineExceeded] for
// a plain deadline); [Check] reports both as [ErrExhausted].
//
// Callers that pass callTimeout <= 0 opt out of the per-call bound on
// purpose; configuration validation normally forbids it.
func CapWith(ctx context.Context, callTimeout, reserve time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		// Already cancelled or expired: keep ctx's own error and cause.
		// WithCancel of a done parent is done at once and starts no timer.
		return context.WithCancel(ctx)
	}
	reserve = max(reserve, 0)
	now := time.Now()
	callerDeadline, ok := ctx.Deadline()
	if !ok {
		if callTimeout <= 0 {
			return context.WithCancel(ctx)
		}
		return context.WithDeadlineCause(ctx, now.Add(callTimeout), ErrCallTimeout)
	}
	// budgetDeadline = callerDeadline - reserve is never after
	// callerDeadline, so WithDeadlineCause below always installs our own
	// cause instead of falling back to WithCancel.
	budgetDeadline := callerDeadline.Add(-reserve)
	remaining := subSat(callerDeadline.Sub(now), reserve)
	if callTimeout <= 0 || remaining < callTimeout {
		// The budget is the tighter bound (remaining <= 0 always lands
		// here). When remaining <= 0, budgetDeadline <= now and
		// WithDeadlineCause cancels the context at once with
		// (DeadlineExceeded, ErrExhausted) without starting a timer.
		return context.WithDeadlineCause(ctx, budgetDeadline, ErrExhausted)
	}
	// remaining >= callTimeout > 0: now+callTimeout <= budgetDeadline.
	return context.WithDeadlineCause(ctx, now.Add(callTimeout), ErrCallTimeout)
}

// Check reports whether ctx still has time budget for an outbound call,
// keeping reserve back (a negative reserve is treated as 0). It neither
// allocates nor touches the network, so it is cheap enough to run before
// every call. It returns:
//
//   - nil if ctx is not done and has no deadline or has more than reserve
//     left before it;
//   - [ErrExhausted] if ctx has a deadline and deadline-now-reserve <= 0;
//   - context.Cause(ctx) if ctx is already done, except that a bare
//     [context.DeadlineExceeded] (a plain deadline that expired) is reported
//     as [ErrExhausted], since that is exactly what it means here. A done
//     context from [CapWith] thus reports [ErrExhausted] or
//     [ErrCallTimeout], and a cancelled one [context.Canceled] or its own
//     cause.
//
// Errors are returned as is, never wrapped.
func Check(ctx context.Context, reserve time.Duration) error {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if cause == context.DeadlineExceeded {
			return ErrExhausted
		}
		return cause
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	// time.Until saturates, so this comparison cannot overflow.
	if time.Until(deadline) <= max(reserve, 0) {
		return ErrExhausted
	}
	return nil
}

// Remaining returns deadline-now-reserve and true when ctx has a deadline,
// and 0, false when it has none. The result is negative when less than
// reserve is left; it saturates instead of overflowing for extreme
// deadlines. A negative reserve is treated as 0. Remaining does not look at
// whether ctx has been cancelled; use [Check] for that.
func Remaining(ctx context.Context, reserve time.Duration) (time.Duration, bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return subSat(time.Until(deadline), max(reserve, 0)), true
}

// subSat returns a-b for b >= 0, saturating at math.MinInt64 instead of
// wrapping around.
func subSat(a, b time.Duration) time.Duration {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}
