package registry

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/capbudget"
)

// callCtx is a call's capped context, the budget stage's result: the
// caller's context with the call's deadline, CALL_TIMEOUT or the caller's
// remaining budget less the reserve if that is sooner. It behaves as
// capbudget.CapWith's context (Deadline, and at the deadline Err
// context.DeadlineExceeded and Cause capbudget.ErrCallTimeout or
// capbudget.ErrExhausted), but it is a context.WithCancelCause of the
// caller's, ended at the deadline by the permit's one timer, which also
// gives the permit back. CapWith's context.WithDeadlineCause has a timer
// of its own, so a call needed two (and a context.AfterFunc to learn that
// the first had fired); this one lives inside the call's body, which
// costs nothing more.
//
// Contexts derived from it (the transport's) find its cancelCtx through
// Value and attach to it as to any cancelCtx, without a goroutine. They
// see the cause (the transport reports context.Cause), but their Err is
// context.Canceled where a WithDeadlineCause's children would see
// context.DeadlineExceeded: the pipeline judges the call's own context,
// never theirs.
type callCtx struct {
	context.Context // context.WithCancelCause(the caller's context)
	cancel          context.CancelCauseFunc
	deadline        time.Time
	cause           error // capbudget.ErrCallTimeout or capbudget.ErrExhausted
	expired         atomic.Bool
}

// start makes c the caller's parent capped at d from now, with cause for
// when d passes; it starts no timer (the permit's ends it: expire).
func (c *callCtx) start(parent context.Context, d time.Duration, cause error) {
	c.Context, c.cancel = context.WithCancelCause(parent)
	c.deadline = time.Now().Add(d)
	c.cause = cause
}

// budget returns the call's time and the cause of its deadline: the
// caller's remaining budget less the reserve when that is sooner than
// CALL_TIMEOUT (capped), else CALL_TIMEOUT.
func budget(parent context.Context, callTimeout time.Duration) (_ time.Duration, cause error, capped bool) {
	if rem, ok := capbudget.Remaining(parent, capbudget.DefaultReserve); ok && rem < callTimeout {
		return rem, capbudget.ErrExhausted, true
	}
	return callTimeout, capbudget.ErrCallTimeout, false
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Err is context.DeadlineExceeded once the deadline ended the call, as a
// WithDeadlineCause's would be.
func (c *callCtx) Err() error {
	err := c.Context.Err()
	if err == context.Canceled && c.expired.Load() && context.Cause(c.Context) == c.cause {
		return context.DeadlineExceeded
	}
	return err
}

// expire ends c at its deadline, unless it ended already.
func (c *callCtx) expire() {
	if c.Context.Err() == nil {
		c.expired.Store(true)
		c.cancel(c.cause)
	}
}
