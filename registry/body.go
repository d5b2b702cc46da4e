package registry

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/outbound-go/outbound/internal/refusal"
	"github.com/outbound-go/outbound/observe"
)

// errReadAfterClose is the cause of a read ended by Close. Close cuts the
// read by cancelling the call's context; the caller did not.
var errReadAfterClose = errors.New("read on a closed response body")

// permitBody is a response's body that hands the call's permit back when the
// caller is done with it: at EOF, at Close, or at the call's deadline.
// The permit and Call, the caller's own value of the call, live inside
// it, so that a call costs one allocation for all of them. A permitBody's
// zero value waits for Wrap.
type permitBody[T any] struct {
	Permit callPermit
	Call   T
	// Loan, when set, is what the call lent its transport: it is given
	// back (Return) once the caller has closed the body, when net/http's
	// RoundTripper contract lets the request be reused.
	Loan interface{ Return() }

	rc     io.ReadCloser
	resp   *http.Response // the response it is the body of: its trailers are checked at EOF
	length int64          // resp.ContentLength: -1 when unknown
	eof    atomic.Bool
	closed atomic.Bool // Close was called, maybe by another goroutine
}

// Read reads the body. A read cut by Close, by the call's deadline or by
// the caller is an error of the owner's ReadError, naming the op: body
// closed, call timeout, budget timeout, canceled, idle timeout.
func (b *permitBody[T]) Read(p []byte) (int, error) {
	if s := b.Permit.Stream(); s != nil {
		// The idle bound counts from the caller's read, and again from
		// its return: a caller that stops reading is bounded too.
		s.Read()
		defer s.Read()
	}
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF && b.closed.Load() {
		// Close (from another goroutine, or before this Read) ended the
		// read: not the caller's cancellation nor a deadline.
		return n, b.Permit.owner.ReadError(observe.OpBodyClosed, errReadAfterClose)
	}
	if ctx := b.Permit.Ctx(); err != nil && err != io.EOF && ctx.Err() != nil {
		// The call's deadline (or the caller) ended the read: say which,
		// as http.Client does for its Timeout.
		return n, b.Permit.owner.ReadError(classify(ctx, err), withCause(err, ctx))
	}
	if err == io.EOF && b.eof.CompareAndSwap(false, true) {
		// Trailers arrive with the end of the body: only the pipeline
		// may mark a response refused.
		delete(b.resp.Trailer, refusal.Header)
		delete(b.resp.Trailer, refusal.SystemHeader)
		delete(b.resp.Trailer, refusal.GaveUpHeader)
		delete(b.resp.Trailer, refusal.AttemptsHeader)
		// The permit goes back at EOF, but the context is cancelled only
		// at Close: cancelling now would not lose data, yet Close is what
		// returns the connection to the pool.
		b.Permit.Stop()
		b.Permit.Release()
	}
	return n, err
}

// Close drains the unread rest of the body, whatever its framing, within
// drain's bounds (256 KiB, 50ms, and the call's deadline) before closing
// it, so that the connection goes back to the pool: net/http closes the
// connection of a body closed unread. A body that stalls is cut by
// cancelling the call's context and costs its connection instead.
func (b *permitBody[T]) Close() error {
	first := !b.closed.Swap(true)
	var err error
	if b.eof.Load() || b.Permit.Ctx().Err() != nil {
		err = b.rc.Close()
	} else {
		err = drainClose(b.rc, b.length, b.Permit.End)
	}
	b.Permit.Done()
	if first {
		b.giveBack()
	}
	return err
}

// giveBack returns the call's loan, once the body is closed.
func (b *permitBody[T]) giveBack() {
	if b.Loan != nil {
		b.Loan.Return()
		b.Loan = nil
	}
}

// Wrap hands the call's permit to resp's body, or ends the call now when
// there is nothing to read (HEAD, 204, 304, Content-Length: 0): callers
// often skip Close there, so the body is closed (HTTP/2 has its own empty
// body, not http.NoBody) and the permit and the deadline end at once.
func (b *permitBody[T]) Wrap(resp *http.Response) *http.Response {
	if bodyless(resp) {
		if resp.Body != nil && resp.Body != http.NoBody {
			_ = resp.Body.Close()
		}
		resp.Body = http.NoBody
		b.Permit.Done()
		b.giveBack()
		return resp
	}
	if s := b.Permit.Stream(); s != nil {
		s.Headers()
	}
	b.rc, b.resp, b.length = resp.Body, resp, resp.ContentLength
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
