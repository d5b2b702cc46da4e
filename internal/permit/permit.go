// Package permit is one call's bulkhead permit and deadline, given back
// exactly once whoever ends the call first: the caller closing the body
// or reading it to the end, the call failing, its deadline, or the
// caller's context. It is internal: the registry's bulkhead and budget
// stages make one per call and the response body carries it.
package permit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/internal/stream"
	"github.com/outbound-go/outbound/observe"
)

// Owner is what the permits of one system give back to: its bulkhead,
// and its pool of connections when the registry was closed meanwhile.
type Owner struct {
	Bulkhead *bulkhead.Bulkhead
	Closed   *atomic.Bool // the registry's
	Pool     interface{ CloseIdleConnections() }
	// ReadError makes the error of a read of a body that op ended
	// (the registry's *Error, naming the system).
	ReadError func(op observe.Op, cause error) error
}

// Permit is one call's bulkhead permit and deadline. It is given back
// exactly once: when the body is closed or read to EOF, when the call
// fails, or when the call's deadline fires or the caller's context ends,
// whichever comes first, so a caller that forgets to close a body holds
// the permit no longer than the call's deadline. Its zero value is ready
// for Start; it lives inside the call's response body, so that a call
// costs one allocation for both.
type Permit struct {
	owner   *Owner
	ctx     context.Context    // the call's context: &cc, or a stream's (Ctx)
	cancel  context.CancelFunc // a stream's; nil: cc's
	cc      callCtx            // the call's capped context (the budget stage)
	timer   *time.Timer        // ends cc at its deadline and gives the permit back
	ctxStop func() bool        // stops a context.AfterFunc that gives the permit back; may be nil
	stream  *stream.Timer      // nil unless the call is a stream (WithStream)
	// held: the bulkhead admitted the call, so the timer gives the
	// permit back.
	held atomic.Bool
	// released gives the permit back once. A sync.Once, not a flag: a
	// caller's release (Close) must not return while another goroutine
	// (the context.AfterFunc of a stream or of the caller's context) is
	// still giving the permit back, or Status would show it held after
	// Close.
	released sync.Once
}

// Start caps the call at d (cause: why d is what it is), in cc, and
// starts the permit's timer, for owner. The permit is not held yet (see
// Watch).
func (p *Permit) Start(owner *Owner, parent context.Context, d time.Duration, cause error) {
	p.owner = owner
	p.cc.start(parent, d, cause)
	p.ctx = &p.cc
	if d <= 0 {
		p.cc.expire() // no time: done at once, no timer
		return
	}
	p.timer = time.AfterFunc(d, p.expire)
}

// expire is the timer's: the deadline ends the call's context and, once
// the permit is held, gives it back.
func (p *Permit) expire() {
	p.cc.expire()
	if p.held.Load() {
		p.Release()
	}
}

// Watch arranges for the permit, now held, to come back when the call's
// context ends, parent being the caller's context, which ctx derives
// from. ctx ends when its deadline passes (the timer) or parent ends: a
// context.AfterFunc on parent, and only when parent can end by itself (a
// server request's context; never context.Background). A
// context.AfterFunc on ctx itself would cost three allocations more per
// call (the registration, a children map in ctx, the stop closure). A
// stream (its own timer cancels its context) keeps the plain
// context.AfterFunc on its context.
func (p *Permit) Watch(parent context.Context) {
	if p.stream != nil {
		p.ctxStop = context.AfterFunc(p.ctx, p.Release)
		return
	}
	p.held.Store(true)
	if p.ctx.Err() != nil {
		// The deadline fired before the permit was held: give it back
		// now, as a context.AfterFunc on a done context would.
		p.Release()
		return
	}
	if parent.Done() != nil {
		p.ctxStop = context.AfterFunc(parent, p.Release)
	}
}

// Stop stops watching the call's context: the permit is back or about to
// be given back by its caller.
func (p *Permit) Stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.ctxStop != nil {
		p.ctxStop()
	}
}

// End cancels the call's context.
func (p *Permit) End() {
	if p.cancel != nil {
		p.cancel()
		return
	}
	p.cc.cancel(nil)
}

// Release gives the permit back; it runs at most once, and returns only
// once the permit is back, whoever gave it.
func (p *Permit) Release() {
	p.released.Do(p.giveBack)
}

func (p *Permit) giveBack() { _ = p.owner.Bulkhead.Release() }

// Done ends the call: the permit goes back and the deadline's timer stops.
func (p *Permit) Done() {
	p.Stop()
	p.Release()
	p.End()
	if p.owner.Closed.Load() {
		// The registry closed while this call was in flight: its
		// connection went back to the pool after Close emptied it.
		p.owner.Pool.CloseIdleConnections()
	}
}

// Ctx is the call's context: its capped context, or a stream's.
func (p *Permit) Ctx() context.Context { return p.ctx }

// Stream is the call's stream timer; nil unless the call is a stream.
func (p *Permit) Stream() *stream.Timer { return p.stream }

// StartStream makes the call a stream (registry.WithStream): its capped
// context and timer end, and a stream's context, its cancel and its
// timer stand in for them. The permit is not held yet (see Watch).
func (p *Permit) StartStream(ctx context.Context, cancel context.CancelFunc, t *stream.Timer) {
	p.Stop()
	p.End()
	p.ctx, p.cancel, p.stream = ctx, cancel, t
}

// callCtx is a call's capped context, the budget stage's result: the
// caller's context with the call's deadline, CALL_TIMEOUT or the caller's
// remaining budget less the reserve if that is sooner. It behaves as
// capbudget.CapWith's context (Deadline, and at the deadline Err
// context.DeadlineExceeded and Cause capbudget.ErrCallTimeout or
// capbudget.ErrExhausted), but it is a context.WithCancelCause of the
// caller's, ended at the deadline by the permit's one timer, which also
// gives the permit back.
//
// It is written out rather than taken from capbudget.CapWith because
// CapWith's context.WithDeadlineCause has a timer of its own: a call
// needed two timers, and a context.AfterFunc on the capped context to
// give the permit back when the first fired. On the registry's
// BenchmarkCall that was 3 allocations per call more (88 -> 85 allocs/op
// at 1, 16 and 64 in flight; benchstat in the commit that made it); this
// one lives inside the call's body, which costs nothing more.
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
