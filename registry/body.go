package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/internal/drain"
	"github.com/outbound-go/outbound/observe"
)

// permit is one call's bulkhead permit and deadline. It is given back
// exactly once: when the body is closed or read to EOF, when the call
// fails, or when the call's deadline fires or the caller's context ends,
// whichever comes first, so a caller that forgets to close a body holds
// the permit no longer than the call's deadline.
type permit struct {
	c       *Client
	ctx     context.Context    // the call's context: &cc, or a stream's
	cancel  context.CancelFunc // a stream's; nil: cc's
	cc      callCtx            // the call's capped context (the budget stage)
	timer   *time.Timer        // ends cc at its deadline and gives the permit back
	ctxStop func() bool        // stops a context.AfterFunc that gives the permit back; may be nil
	stream  *stream            // nil unless the call is a stream (WithStream)
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

// start caps the call at d (cause: why d is what it is), in cc, and
// starts the permit's timer. The permit is not held yet (see watch).
func (p *permit) start(parent context.Context, d time.Duration, cause error) {
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
func (p *permit) expire() {
	p.cc.expire()
	if p.held.Load() {
		p.release()
	}
}

// watch arranges for the permit, now held, to come back when the call's
// context ends, parent being the caller's context, which ctx derives
// from. ctx ends when its deadline passes (the timer) or parent ends: a
// context.AfterFunc on parent, and only when parent can end by itself (a
// server request's context; never context.Background). A
// context.AfterFunc on ctx itself would cost three allocations more per
// call (the registration, a children map in ctx, the stop closure). A
// stream (its own timer cancels its context) keeps the plain
// context.AfterFunc on its context.
func (p *permit) watch(parent context.Context) {
	if p.stream != nil {
		p.ctxStop = context.AfterFunc(p.ctx, p.release)
		return
	}
	p.held.Store(true)
	if p.ctx.Err() != nil {
		// The deadline fired before the permit was held: give it back
		// now, as a context.AfterFunc on a done context would.
		p.release()
		return
	}
	if parent.Done() != nil {
		p.ctxStop = context.AfterFunc(parent, p.release)
	}
}

// stop stops watching the call's context: the permit is back or about to
// be given back by its caller.
func (p *permit) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.ctxStop != nil {
		p.ctxStop()
	}
}

// end cancels the call's context.
func (p *permit) end() {
	if p.cancel != nil {
		p.cancel()
		return
	}
	p.cc.cancel(nil)
}

// release gives the permit back; it runs at most once, and returns only
// once the permit is back, whoever gave it.
func (p *permit) release() {
	p.released.Do(p.giveBack)
}

func (p *permit) giveBack() { _ = p.c.bh.Release() }

// done ends the call: the permit goes back and the deadline's timer stops.
func (p *permit) done() {
	p.stop()
	p.release()
	p.end()
	if p.c.closed.Load() {
		// The registry closed while this call was in flight: its
		// connection went back to the pool after Close emptied it.
		p.c.transport.CloseIdleConnections()
	}
}

// errReadAfterClose is the cause of a read ended by Close. Close cuts the
// read by cancelling the call's context; the caller did not.
var errReadAfterClose = errors.New("read on a closed response body")

// body hands the permit back when the caller is done with the response.
// The permit lives inside it, so that a call costs one allocation for
// both.
type body struct {
	rc     io.ReadCloser
	p      permit
	length int64 // resp.ContentLength: -1 when unknown
	eof    atomic.Bool
	closed atomic.Bool // Close was called, maybe by another goroutine
}

func (b *body) Read(p []byte) (int, error) {
	if s := b.p.stream; s != nil {
		// The idle bound counts from the caller's read, and again from
		// its return: a caller that stops reading is bounded too.
		s.read()
		defer s.read()
	}
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF && b.closed.Load() {
		// Close (from another goroutine, or before this Read) ended the
		// read: not the caller's cancellation nor a deadline.
		return n, &Error{System: b.p.c.name, Op: observe.OpBodyClosed, Err: errReadAfterClose}
	}
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

// Close drains the unread rest of the body, whatever its framing, within
// drain's bounds (256 KiB, 50ms, and the call's deadline) before closing
// it, so that the connection goes back to the pool: net/http closes the
// connection of a body closed unread. A body that stalls is cut by
// cancelling the call's context and costs its connection instead.
func (b *body) Close() error {
	b.closed.Store(true)
	var err error
	if b.eof.Load() || b.p.ctx.Err() != nil {
		err = b.rc.Close()
	} else {
		err = drain.Close(b.rc, b.length, b.p.end)
	}
	b.p.done()
	return err
}

// wrap hands the call's permit to resp's body, or ends the call now when
// there is nothing to read (HEAD, 204, 304, Content-Length: 0): callers
// often skip Close there, so the body is closed (HTTP/2 has its own empty
// body, not http.NoBody) and the permit and the deadline end at once.
func (b *body) wrap(resp *http.Response) *http.Response {
	if bodyless(resp) {
		if resp.Body != nil && resp.Body != http.NoBody {
			_ = resp.Body.Close()
		}
		resp.Body = http.NoBody
		b.p.done()
		return resp
	}
	if b.p.stream != nil {
		b.p.stream.headers()
	}
	b.rc = resp.Body
	b.length = resp.ContentLength
	resp.Body = b
	return resp
}

// bodyless reports whether resp can have no body to read, whatever the
// protocol: HTTP/1 gives http.NoBody, HTTP/2 an empty body of its own.
func bodyless(resp *http.Response) bool {
	return resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified ||
		(resp.Request != nil && resp.Request.Method == http.MethodHead)
}
