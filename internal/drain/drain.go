// Package drain reads what is left of a response body, within a size and a
// time bound, before closing it, so that its connection can go back to the
// pool: net/http closes the connection of a body closed unread. It is
// internal: the registry drains before every retry and on Close, and the
// adapters rely on the registry's Close.
package drain

import (
	"io"
	"net/http"
	"time"
)

const (
	// MaxBytes is the most a drain reads. A longer body costs its
	// connection instead. From Go 1.27 net/http goes on draining, off the
	// caller's time, a body this drain left unfinished (one of unknown
	// length read up to about 512 KiB in all); this drain still ends
	// before a retry dials and before the call's permit is given back.
	MaxBytes = 256 << 10
	// MaxWait is the longest a drain waits for the rest of a body. An
	// upstream that stalls mid-body costs its connection instead.
	MaxWait = 50 * time.Millisecond
)

// Close reads and discards at most MaxBytes of body for at most MaxWait,
// then closes it. length is what is known of the body's remaining length
// (-1: unknown, whatever the framing); a body known to be longer than
// MaxBytes is closed at once, unread.
//
// When MaxWait passes first, cut is called from a timer goroutine to end
// the read in progress (nil: body.Close, which net/http allows while a Read
// is blocked); the connection is then closed rather than reused. Close
// returns body.Close's error.
func Close(body io.ReadCloser, length int64, cut func()) error {
	if body == nil {
		return nil
	}
	if length != 0 && length <= MaxBytes {
		if cut == nil {
			cut = func() { _ = body.Close() }
		}
		t := time.AfterFunc(MaxWait, cut)
		// One byte more than MaxBytes: a chunked body of exactly
		// MaxBytes is reused only once its end (io.EOF) is read.
		_, _ = io.CopyN(io.Discard, body, MaxBytes+1)
		t.Stop()
	}
	return body.Close()
}

// Response drains resp's body and closes it, so that its connection can
// go back to the pool before a retry; a body that stalls costs its
// connection, not the call's time.
func Response(resp *http.Response) {
	_ = Close(resp.Body, resp.ContentLength, nil)
}
