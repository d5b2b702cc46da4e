package registry

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// drainWait bounds how long Close drains an unread body.
const drainWait = 50 * time.Millisecond

// permit is one call's bulkhead permit and deadline. It is given back
// exactly once: when the body is closed or read to EOF, when the call
// fails, or when the call's deadline fires, whichever comes first, so a
// caller that forgets to close a body holds the permit no longer than the
// call's deadline.
type permit struct {
	c        *Client
	ctx      context.Context // the call's capped context
	cancel   context.CancelFunc
	stop     func() bool
	released atomic.Bool
}

// release gives the permit back; it runs at most once.
func (p *permit) release() {
	if p.released.CompareAndSwap(false, true) {
		_ = p.c.bh.Release()
	}
}

// done ends the call: the permit goes back and the deadline's timer stops.
func (p *permit) done() {
	p.stop()
	p.release()
	p.cancel()
	if p.c.closed.Load() {
		// The registry closed while this call was in flight: its
		// connection went back to the pool after Close emptied it.
		p.c.transport.CloseIdleConnections()
	}
}

// body hands the permit back when the caller is done with the response.
// The permit lives inside it, so that a call costs one allocation for
// both.
type body struct {
	rc    io.ReadCloser
	p     permit
	small bool // Content-Length known and <= maxDrain: worth draining on Close
	eof   atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF && b.p.ctx.Err() != nil {
		// The call's deadline (or the caller) ended the read: say which,
		// and for which system, as http.Client does for its Timeout.
		return n, &Error{System: b.p.c.name, Op: classify(b.p.ctx, err), Err: withCause(err, b.p.ctx)}
	}
	if err == io.EOF && b.eof.CompareAndSwap(false, true) {
		// The permit goes back at EOF, but the context is cancelled only
		// at Close: cancelling now would not lose data, yet Close is what
		// returns the connection to the pool.
		b.p.stop()
		b.p.release()
	}
	return n, err
}

// Close drains a small unread rest of the body (a known length up to
// maxDrain, read under the call's deadline) before closing it, so that the
// connection goes back to the pool: net/http closes the connection of a
// body closed unread.
func (b *body) Close() error {
	if !b.eof.Load() && b.small && b.p.ctx.Err() == nil {
		// At most drainWait: an upstream that stalls mid-body must not
		// hold the caller's Close until the call's deadline; cutting the
		// call's context ends the read and costs the connection instead.
		t := time.AfterFunc(drainWait, b.p.cancel)
		_, _ = io.CopyN(io.Discard, b.rc, maxDrain)
		t.Stop()
	}
	err := b.rc.Close()
	b.p.done()
	return err
}
