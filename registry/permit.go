// Permit: one call's bulkhead permit and deadline, given back exactly
// once whoever ends the call first: the caller closing the body or
// reading it to the end, the call failing, its deadline, or the caller's
// context. The bulkhead and budget stages make one per call and the
// response body carries it.

package registry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/observe"
)

// permitOwner is what the permits of one system give back to: its bulkhead,
// and its pool of connections when the registry was closed meanwhile.
type permitOwner struct {
	Bulkhead *bulkhead.Bulkhead
	Closed   *atomic.Bool // the registry's
	Pool     interface{ CloseIdleConnections() }
	// ReadError makes the error of a read of a body that op ended
	// (the registry's *Error, naming the system).
	ReadError func(op observe.Op, cause error) error
}

// callPermit is one call's bulkhead permit and deadline. It is given back
// exactly once: when the body is closed or read to EOF, when the call
// fails, or when the call's deadline fires or the caller's context ends,
// whichever comes first, so a caller that forgets to close a body holds
// the permit no longer than the call's deadline. Its zero value is ready
// for Start; it lives inside the call's response body, so that a call
// costs one allocation for both.
//
// The call's context is the standard library's: a
// context.WithDeadlineCause of the caller's, and a context.AfterFunc on
// it gives the permit back when it ends, by its deadline or by the
// caller's.
type callPermit struct {
	owner   *permitOwner
	ctx     context.Context    // the call's context: capped (Start), or a stream's
	cancel  context.CancelFunc // ends ctx
	ctxStop func() bool        // stops the context.AfterFunc that gives the permit back; may be nil
	stream  *streamTimer       // nil unless the call is a stream (WithStream)
	// released gives the permit back once. A sync.Once, not a flag: a
	// caller's release (Close) must not return while another goroutine
	// (the context.AfterFunc) is still giving the permit back, or Status
	// would show it held after Close.
	released sync.Once
}

// Start caps the call at d from now (cause: why d is what it is, the
// context's cause at the deadline), for owner. The permit is not held
// yet (see Watch).
func (p *callPermit) Start(owner *permitOwner, parent context.Context, d time.Duration, cause error) {
	p.owner = owner
	p.ctx, p.cancel = context.WithDeadlineCause(parent, time.Now().Add(d), cause)
}

// Watch arranges for the permit, now held, to come back when the call's
// context ends: its deadline, the caller's context, or a stream's own
// timer.
func (p *callPermit) Watch() {
	if p.ctx.Err() != nil {
		// The deadline passed before the permit was held: give it back
		// now, rather than from the goroutine a context.AfterFunc on a
		// done context would start.
		p.Release()
		return
	}
	p.ctxStop = context.AfterFunc(p.ctx, p.Release)
}

// Stop stops watching the call's context: the permit is back or about to
// be given back by its caller.
func (p *callPermit) Stop() {
	if p.ctxStop != nil {
		p.ctxStop()
	}
}

// End cancels the call's context.
func (p *callPermit) End() { p.cancel() }

// Release gives the permit back; it runs at most once, and returns only
// once the permit is back, whoever gave it.
func (p *callPermit) Release() {
	p.released.Do(p.giveBack)
}

func (p *callPermit) giveBack() { _ = p.owner.Bulkhead.Release() }

// Done ends the call: the permit goes back and the deadline's timer stops.
func (p *callPermit) Done() {
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
func (p *callPermit) Ctx() context.Context { return p.ctx }

// Stream is the call's stream timer; nil unless the call is a stream.
func (p *callPermit) Stream() *streamTimer { return p.stream }

// StartStream makes the call a stream (registry.WithStream): its capped
// context ends, and a stream's context, its cancel and its timer stand
// in for them. The permit is not held yet (see Watch).
func (p *callPermit) StartStream(ctx context.Context, cancel context.CancelFunc, t *streamTimer) {
	p.Stop()
	p.End()
	p.ctx, p.cancel, p.stream = ctx, cancel, t
}
