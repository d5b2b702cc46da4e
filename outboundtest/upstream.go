package outboundtest

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Upstream is a fake upstream: an *httptest.Server bound to 127.0.0.1 that
// counts what reaches it. Its URL field is the base URL to configure
// (http://127.0.0.1:port). Its methods are safe for concurrent use.
//
// Create it with [NewUpstream] or [NewTLSUpstream]; the test's cleanup
// closes it (see the package doc for how hung handlers are released).
type Upstream struct {
	*httptest.Server

	stopCtx   context.Context // Done() is the upstream-wide stop channel
	stop      context.CancelFunc
	closeOnce sync.Once

	conns, open, requests, inFlight, maxInFlight atomic.Int64
}

// NewUpstream starts an HTTP/1.1 server on 127.0.0.1:0 serving h, and
// closes it in t.Cleanup. It fails the test if it cannot listen.
func NewUpstream(t testing.TB, h http.Handler) *Upstream {
	t.Helper()
	return start(t, h, false)
}

// NewTLSUpstream is [NewUpstream] over TLS, with httptest's self-signed
// certificate (trust it through Upstream.Certificate()).
func NewTLSUpstream(t testing.TB, h http.Handler) *Upstream {
	t.Helper()
	return start(t, h, true)
}

func start(t testing.TB, h http.Handler, useTLS bool) *Upstream {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("outboundtest: listen on 127.0.0.1: %v", err)
	}
	u := &Upstream{}
	u.stopCtx, u.stop = context.WithCancel(context.Background())
	u.Server = &httptest.Server{
		Listener: ln,
		Config: &http.Server{
			Handler: u.wrap(h),
			// httptest chains its own ConnState hook after this one.
			ConnState: u.connState,
			// Aborted handlers and broken connections are the point
			// here; never log them (nor through t after the test).
			ErrorLog: log.New(io.Discard, "", 0),
		},
	}
	if useTLS {
		u.StartTLS()
	} else {
		u.Start()
	}
	t.Cleanup(u.Close)
	return u
}

func (u *Upstream) connState(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		u.conns.Add(1)
		u.open.Add(1)
	case http.StateClosed, http.StateHijacked:
		// A hijacked connection is the handler's: the behaviours here
		// close it before they return.
		u.open.Add(-1)
	}
}

// wrap counts the request and the handlers in flight, makes the stop
// channel reachable through [Stopped], and releases the handler's
// connection I/O when the upstream stops.
func (u *Upstream) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		n := u.inFlight.Add(1)
		defer u.inFlight.Add(-1)
		for {
			m := u.maxInFlight.Load()
			if n <= m || u.maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		// A handler blocked reading a stalled request body, or writing
		// to a client that does not read, fails once the deadlines pass.
		release := context.AfterFunc(u.stopCtx, func() {
			rc := http.NewResponseController(w)
			past := time.Unix(1, 0)
			_ = rc.SetReadDeadline(past)
			_ = rc.SetWriteDeadline(past)
		})
		defer release()
		ctx := context.WithValue(r.Context(), stopKey{}, u.stopCtx.Done())
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Close releases every waiting handler, then closes the server and its
// connections. The test's cleanup calls it; calling it again is harmless.
func (u *Upstream) Close() {
	u.closeOnce.Do(func() {
		u.stop()
		u.Server.Close()
	})
}

// Addr returns the upstream's host:port (127.0.0.1:port).
func (u *Upstream) Addr() string { return u.Listener.Addr().String() }

// Requests returns how many requests have reached the handler.
func (u *Upstream) Requests() int64 { return u.requests.Load() }

// Conns returns how many TCP connections the upstream has accepted.
func (u *Upstream) Conns() int64 { return u.conns.Load() }

// OpenConns returns how many of those connections are open now, idle ones
// included. It is 0 once every client closed its connections; the server
// notices a close a moment after the client makes it.
func (u *Upstream) OpenConns() int64 { return u.open.Load() }

// InFlight returns how many handlers are running now.
func (u *Upstream) InFlight() int64 { return u.inFlight.Load() }

// MaxInFlight returns the most handlers that ran at once.
func (u *Upstream) MaxInFlight() int64 { return u.maxInFlight.Load() }

type stopKey struct{}

// Stopped returns the stop channel of the [Upstream] serving r: it is
// closed when the upstream starts to close. For a request not served by an
// Upstream it returns nil, a channel that never fires, so selecting on it
// is always safe.
func Stopped(r *http.Request) <-chan struct{} {
	ch, _ := r.Context().Value(stopKey{}).(<-chan struct{})
	return ch
}

// Wait blocks for d, or until r's client goes away, or until the serving
// [Upstream] stops, whichever comes first, and reports whether the whole d
// passed. Custom handlers should wait with it instead of time.Sleep.
func Wait(r *http.Request, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-r.Context().Done():
	case <-Stopped(r):
	}
	return false
}

// abort ends the handler and drops the connection without a (further)
// response; net/http recovers http.ErrAbortHandler silently.
func abort() { panic(http.ErrAbortHandler) }
