package registry

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/outbound-go/outbound/internal/cause"
	"github.com/outbound-go/outbound/internal/drain"
	"github.com/outbound-go/outbound/internal/permit"
	"github.com/outbound-go/outbound/internal/transport"
	"github.com/outbound-go/outbound/observe"
)

// errReadAfterClose is the cause of a read ended by Close. Close cuts the
// read by cancelling the call's context; the caller did not.
var errReadAfterClose = errors.New("read on a closed response body")

// body hands the permit back when the caller is done with the response.
// The permit and the call live inside it, so that a call costs one
// allocation for all of them.
type body struct {
	rc     io.ReadCloser
	p      permit.Permit
	call   call
	resp   *http.Response // the response it is the body of: its trailers are checked at EOF
	length int64          // resp.ContentLength: -1 when unknown
	eof    atomic.Bool
	closed atomic.Bool // Close was called, maybe by another goroutine
}

func (b *body) Read(p []byte) (int, error) {
	if s := b.p.Stream(); s != nil {
		// The idle bound counts from the caller's read, and again from
		// its return: a caller that stops reading is bounded too.
		s.Read()
		defer s.Read()
	}
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF && b.closed.Load() {
		// Close (from another goroutine, or before this Read) ended the
		// read: not the caller's cancellation nor a deadline.
		return n, &Error{System: b.call.c.name, Op: observe.OpBodyClosed, Err: errReadAfterClose}
	}
	if err != nil && err != io.EOF && b.p.Ctx().Err() != nil {
		// The call's deadline (or the caller) ended the read: say which,
		// and for which system, as http.Client does for its Timeout.
		return n, &Error{System: b.call.c.name, Op: transport.Classify(b.p.Ctx(), err), Err: cause.With(err, b.p.Ctx())}
	}
	if err == io.EOF && b.eof.CompareAndSwap(false, true) {
		// Trailers arrive with the end of the body: only the pipeline
		// may mark a response refused.
		delete(b.resp.Trailer, RefusedHeader)
		delete(b.resp.Trailer, refusedSystemHeader)
		// The permit goes back at EOF, but the context is cancelled only
		// at Close: cancelling now would not lose data, yet Close is what
		// returns the connection to the pool.
		b.p.Stop()
		b.p.Release()
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
	if b.eof.Load() || b.p.Ctx().Err() != nil {
		err = b.rc.Close()
	} else {
		err = drain.Close(b.rc, b.length, b.p.End)
	}
	b.p.Done()
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
		b.p.Done()
		return resp
	}
	if b.p.Stream() != nil {
		b.p.Stream().Headers()
	}
	b.rc = resp.Body
	b.resp = resp
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
