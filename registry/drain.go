// Drain: what is left of a response body is read, within a size and a
// time bound, before it is closed, so that its connection can go back to
// the pool: net/http closes the connection of a body closed unread. The
// registry drains before every retry and on Close, and the adapters rely
// on the registry's Close.

package registry

import (
	"io"
	"net/http"
	"time"
)

const (
	// drainMaxBytes is the most a drain reads. A longer body costs its
	// connection instead. From Go 1.27 net/http goes on draining, off the
	// caller's time, a body this drain left unfinished (one of unknown
	// length read up to about 512 KiB in all); this drain still ends
	// before a retry dials and before the call's permit is given back.
	drainMaxBytes = 256 << 10
	// drainMaxWait is the longest a drain waits for the rest of a body. An
	// upstream that stalls mid-body costs its connection instead.
	drainMaxWait = 50 * time.Millisecond
)

// drainClose reads and discards at most drainMaxBytes of body for at most drainMaxWait,
// then closes it. length is what is known of the body's remaining length
// (-1: unknown, whatever the framing); a body known to be longer than
// drainMaxBytes is closed at once, unread.
//
// When drainMaxWait passes first, cut is called from a timer goroutine to end
// the read in progress (nil: body.Close, which net/http allows while a Read
// is blocked); the connection is then closed rather than reused. drainClose
// returns body.Close's error.
func drainClose(body io.ReadCloser, length int64, cut func()) error {
	if body == nil {
		return nil
	}
	if length != 0 && length <= drainMaxBytes {
		if cut == nil {
			cut = func() { _ = body.Close() }
		}
		t := time.AfterFunc(drainMaxWait, cut)
		// One byte more than drainMaxBytes: a chunked body of exactly
		// drainMaxBytes is reused only once its end (io.EOF) is read.
		_, _ = io.CopyN(io.Discard, body, drainMaxBytes+1)
		t.Stop()
	}
	return body.Close()
}

// drainResponse drains resp's body and closes it, so that its connection can
// go back to the pool before a retry; a body that stalls costs its
// connection, not the call's time.
func drainResponse(resp *http.Response) {
	_ = drainClose(resp.Body, resp.ContentLength, nil)
}
