package registry

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/observe"
)

// streamKey is the context key of [WithStream].
type streamKey struct{}

// WithStream returns a copy of ctx that makes a call through [Client.Do]
// or [Client.HTTPClient] a stream: its response body (server-sent events,
// a long download, an LLM's tokens) may outlive CALL_TIMEOUT, bounded
// instead by idle, the longest time between two reads.
//
// Until the response headers arrive, nothing changes: CONNECT_TIMEOUT and
// READ_TIMEOUT bound each attempt, and CALL_TIMEOUT bounds the attempts
// and retries together. From the headers on, the body is read with no
// overall deadline: a read that waits longer than idle for data, or a
// caller that does not read again within idle, ends the call with an
// [*Error] of [observe.OpIdleTimeout] (Timeout() is true) and gives the permit
// back. The caller's own deadline, when ctx has one, still bounds the whole
// stream. The bulkhead permit is held until the body is closed (or read to
// EOF, or the idle bound fires): each open stream counts against
// MAX_CONCURRENT, so size it for the streams open at once plus the other
// calls.
//
// An idle of zero or less leaves ctx unchanged: the call is bounded by
// CALL_TIMEOUT as usual.
func WithStream(ctx context.Context, idle time.Duration) context.Context {
	if idle <= 0 {
		return ctx
	}
	return context.WithValue(ctx, streamKey{}, idle)
}

// errStreamIdle is the cause of a stream cut by its idle bound.
var errStreamIdle = errors.New("no data within the stream's idle bound")

// stream is the timer of one streamed call: CALL_TIMEOUT until the
// response headers, then the idle bound, reset around every read.
type stream struct {
	timer *time.Timer
	idle  time.Duration
	body  atomic.Bool // the headers arrived: the timer is the idle bound
	done  atomic.Bool // the call ended: the timer stays stopped
}

// streamIdle returns the idle bound WithStream put in ctx.
func streamIdle(ctx context.Context) (time.Duration, bool) {
	idle, ok := ctx.Value(streamKey{}).(time.Duration)
	return idle, ok
}

// streamCall returns a streamed call's context in place of the capped
// one: the caller's budget (less the reserve) and no CALL_TIMEOUT
// deadline, which the stream's timer stands for, cancelling with the
// cause of the phase it bounds (capbudget.ErrCallTimeout before the
// headers, errStreamIdle after). cancel stops the timer.
func (c *Client) streamCall(ctx context.Context, idle time.Duration) (context.Context, context.CancelFunc, *stream) {
	capped, cancelCap := capbudget.CapWith(ctx, 0, capbudget.DefaultReserve)
	sctx, cancelCause := context.WithCancelCause(capped)
	s := &stream{idle: idle}
	s.timer = time.AfterFunc(c.cfg.CallTimeout, func() {
		if s.body.Load() {
			cancelCause(errStreamIdle)
		} else {
			cancelCause(capbudget.ErrCallTimeout)
		}
	})
	return sctx, func() { s.done.Store(true); s.timer.Stop(); cancelCause(nil); cancelCap() }, s
}

// read re-arms the idle bound around a read of the body.
func (s *stream) read() {
	if !s.done.Load() {
		s.timer.Reset(s.idle)
	}
}

// headers switches the timer to the idle bound: the response is here.
func (s *stream) headers() {
	s.body.Store(true)
	s.timer.Reset(s.idle)
}

// streamTimeout names the op of a streamed call's context cancelled by
// its own timer (ctx.Err() is Canceled there, not DeadlineExceeded).
func streamTimeout(ctx context.Context) (observe.Op, bool) {
	switch context.Cause(ctx) {
	case capbudget.ErrCallTimeout:
		return observe.OpCallTimeout, true
	case errStreamIdle:
		return observe.OpIdleTimeout, true
	}
	return 0, false
}
