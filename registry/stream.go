// Streams: a streamed call (WithStream) is bounded by an idle time
// between reads instead of CALL_TIMEOUT: one timer per call,
// CALL_TIMEOUT until the response headers, then the idle bound, re-armed
// around every read of the body.

package registry

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/observe"
)

type key struct{}

// withStreamIdle returns a copy of ctx that marks a call as a stream bounded by
// idle; an idle of zero or less leaves ctx unchanged.
func withStreamIdle(ctx context.Context, idle time.Duration) context.Context {
	if idle <= 0 {
		return ctx
	}
	return context.WithValue(ctx, key{}, idle)
}

// streamIdle returns the idle bound withStreamIdle put in ctx.
func streamIdle(ctx context.Context) (time.Duration, bool) {
	idle, ok := ctx.Value(key{}).(time.Duration)
	return idle, ok
}

// errStreamIdle is the cause of a stream cut by its idle bound.
var errStreamIdle = errors.New("no data within the stream's idle bound")

// streamTimer is the timer of one streamed call. It is safe for concurrent use.
type streamTimer struct {
	timer *time.Timer
	idle  time.Duration
	body  atomic.Bool // the headers arrived: the timer is the idle bound
	done  atomic.Bool // the call ended: the timer stays stopped
}

// startStream returns a streamed call's context: the caller's budget (less the
// reserve) and no CALL_TIMEOUT deadline, which the timer stands for,
// cancelling with the cause of the phase it bounds
// (capbudget.ErrCallTimeout before the headers, errStreamIdle after). cancel
// stops the timer.
func startStream(ctx context.Context, callTimeout, idle time.Duration) (context.Context, context.CancelFunc, *streamTimer) {
	capped, cancelCap := capbudget.CapWith(ctx, 0, capbudget.DefaultReserve)
	sctx, cancelCause := context.WithCancelCause(capped)
	s := &streamTimer{idle: idle}
	s.timer = time.AfterFunc(callTimeout, func() {
		if s.body.Load() {
			cancelCause(errStreamIdle)
		} else {
			cancelCause(capbudget.ErrCallTimeout)
		}
	})
	return sctx, func() { s.done.Store(true); s.timer.Stop(); cancelCause(nil); cancelCap() }, s
}

// Read re-arms the idle bound around a read of the body.
func (s *streamTimer) Read() {
	if !s.done.Load() {
		s.timer.Reset(s.idle)
	}
}

// Headers switches the timer to the idle bound: the response is here.
func (s *streamTimer) Headers() {
	s.body.Store(true)
	s.timer.Reset(s.idle)
}

// streamTimeout names the op of a streamed call's context cancelled by its own
// timer (ctx.Err() is Canceled there, not DeadlineExceeded).
func streamTimeout(ctx context.Context) (observe.Op, bool) {
	switch context.Cause(ctx) {
	case capbudget.ErrCallTimeout:
		return observe.OpCallTimeout, true
	case errStreamIdle:
		return observe.OpIdleTimeout, true
	}
	return 0, false
}
