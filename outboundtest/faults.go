package outboundtest

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Reply is one scripted answer, and an http.Handler that gives it to every
// request. The zero Reply answers 200 with an empty body.
type Reply struct {
	// Status is the status code; 0 means 200.
	Status int
	// Header is copied into the response headers.
	Header http.Header
	// Body is written after the headers, with a Content-Length unless
	// Header sets one.
	Body string
	// Delay is waited before anything is written. If the client goes
	// away or the upstream stops first, the response is aborted.
	Delay time.Duration
	// Handler, if set, serves the request instead of the fields above
	// (after Delay): Reply{Handler: Reset()}.
	Handler http.Handler
}

// ServeHTTP writes the reply.
func (rp Reply) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rp.Delay > 0 && !Wait(r, rp.Delay) {
		abort()
	}
	if rp.Handler != nil {
		rp.Handler.ServeHTTP(w, r)
		return
	}
	status := rp.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := w.Header()
	for k, vs := range rp.Header {
		h[k] = append([]string(nil), vs...)
	}
	if rp.Body != "" && h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.Itoa(len(rp.Body)))
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, rp.Body)
}

// Healthy answers 200 "ok" at once.
func Healthy() Reply { return Reply{Body: "ok"} }

// SlowHeaders answers 200 "ok" after d, so a client whose READ_TIMEOUT
// (http.Transport.ResponseHeaderTimeout) is shorter than d times out
// waiting for the headers. A client that gives up first gets nothing.
func SlowHeaders(d time.Duration) Reply { return Reply{Body: "ok", Delay: d} }

// Trickle sends 200 headers at once, then one body byte ('x') every
// interval, with no end, until the client goes away or the upstream stops:
// the body is read under the call's deadline, not READ_TIMEOUT. With a long
// interval the body stalls after the headers.
func Trickle(interval time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		if err := rc.Flush(); err != nil {
			abort()
		}
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ticker.C:
			case <-r.Context().Done():
				abort()
			case <-Stopped(r):
				abort()
			}
			if _, err := w.Write([]byte{'x'}); err != nil {
				abort()
			}
			if err := rc.Flush(); err != nil {
				abort()
			}
		}
	})
}

// Reset reads the request, then resets the connection (RST, SO_LINGER 0)
// without a response: the client sees "connection reset by peer"
// (syscall.ECONNRESET), a transport error.
func Reset() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resetConn(hijack(w, r))
	})
}

// ResetMidBody answers 200 with a Content-Length of n+1, sends n bytes
// ('x') of the body, waits a moment, then resets the connection: the
// client reads at most n bytes (usually all n), then an error
// (syscall.ECONNRESET, or io.ErrUnexpectedEOF), never a clean end.
func ResetMidBody(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", strconv.Itoa(n+1))
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, strings.Repeat("x", n))
		if err := http.NewResponseController(w).Flush(); err != nil {
			abort()
		}
		// An RST makes the client's kernel drop what it has not yet
		// handed over: give the bytes a moment to get through.
		Wait(r, resetPause)
		resetConn(hijack(w, r))
	})
}

// resetPause is how long ResetMidBody lets the partial body travel.
const resetPause = 20 * time.Millisecond

// EOF reads the request, then closes the connection cleanly (FIN) without
// a byte of response: the client sees io.EOF, the "server closed the
// connection without answering" case.
func EOF() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = hijack(w, r).Close()
	})
}

// hijack drains the request body (so that closing the socket does not
// reset it for unread data) and takes the connection over, flushing
// whatever the handler wrote.
func hijack(w http.ResponseWriter, r *http.Request) net.Conn {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): dropping the stream comes closest.
		abort()
	}
	return conn
}

// resetConn closes conn with SO_LINGER 0, so that the kernel sends an RST.
func resetConn(conn net.Conn) {
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// Storm answers the first n requests 503 Service Unavailable, then 200
// "ok": an outage that ends. For one that does not, serve
// Reply{Status: 503}. It is safe for concurrent use.
func Storm(n int) http.Handler {
	var seen atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= int64(n) {
			Reply{Status: http.StatusServiceUnavailable, Body: "storm"}.ServeHTTP(w, r)
			return
		}
		Healthy().ServeHTTP(w, r)
	})
}

// Throttle answers 429 Too Many Requests with Retry-After in seconds
// (delay-seconds), d rounded up to a whole second.
func Throttle(d time.Duration) Reply {
	return Reply{Status: http.StatusTooManyRequests, Header: RetryAfterSeconds(int((d + time.Second - 1) / time.Second))}
}

// ThrottleUntil answers 429 Too Many Requests with Retry-After as an HTTP
// date (at, to the second).
func ThrottleUntil(at time.Time) Reply {
	return Reply{Status: http.StatusTooManyRequests, Header: RetryAfterDate(at)}
}

// RetryAfterSeconds returns a header "Retry-After: n" (delay-seconds), for
// [Reply].Header.
func RetryAfterSeconds(n int) http.Header {
	return http.Header{"Retry-After": {strconv.Itoa(n)}}
}

// RetryAfterDate returns a header "Retry-After: <HTTP-date>" (IMF-fixdate,
// "Sun, 06 Nov 1994 08:49:37 GMT"), for [Reply].Header. The format has no
// fraction of a second.
func RetryAfterDate(at time.Time) http.Header {
	return http.Header{"Retry-After": {at.UTC().Format(http.TimeFormat)}}
}
