package testutil

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// Server is an *httptest.Server bound to 127.0.0.1 that counts connections,
// requests and concurrently running handlers. It is the base every other
// server helper in this package is built on.
//
// Its cleanup (registered with t.Cleanup by [NewServer]) first closes the
// server-wide stop channel, expires the deadlines of every in-flight
// connection, and only then calls httptest.Server.Close, so handlers that wait
// can never block the test's teardown.
type Server struct {
	*httptest.Server

	stopCtx context.Context // Done() is the server-wide stop channel
	stop    context.CancelFunc

	conns     atomic.Int64
	requests  atomic.Int64
	active    atomic.Int64
	maxActive atomic.Int64
}

// NewServer starts an HTTP/1.1 server on 127.0.0.1:0 serving h, and closes it
// in t.Cleanup.
func NewServer(t testing.TB, h http.Handler) *Server {
	t.Helper()
	return start(t, h, false)
}

// NewTLSServer is [NewServer] with TLS (httptest's self-signed certificate;
// trust it via Server.Certificate()).
func NewTLSServer(t testing.TB, h http.Handler) *Server {
	t.Helper()
	return start(t, h, true)
}

func start(t testing.TB, h http.Handler, useTLS bool) *Server {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testutil: listen on 127.0.0.1: %v", err)
	}
	s := &Server{}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	s.Server = &httptest.Server{
		Listener: ln,
		Config: &http.Server{
			Handler: s.wrap(h),
			// httptest chains its own ConnState hook after this one.
			ConnState: func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					s.conns.Add(1)
				}
			},
			// Aborted handlers and broken client connections are the
			// point of this package; don't spam the test log (and
			// never log through t after the test has finished).
			ErrorLog: log.New(io.Discard, "", 0),
		},
	}
	if useTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(func() {
		s.stop()
		s.Close()
	})
	return s
}

// wrap counts the request, tracks concurrency, makes the stop channel
// reachable from the handler via [Stopped], and releases the handler's
// connection I/O when the server stops.
func (s *Server) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		n := s.active.Add(1)
		defer s.active.Add(-1)
		for {
			m := s.maxActive.Load()
			if n <= m || s.maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		// If the server stops while this handler is blocked in a read
		// of the request body or a write to a client that doesn't
		// read, expire the connection's deadlines so the I/O fails.
		release := context.AfterFunc(s.stopCtx, func() {
			rc := http.NewResponseController(w)
			past := time.Unix(1, 0)
			_ = rc.SetReadDeadline(past)
			_ = rc.SetWriteDeadline(past)
		})
		defer release()
		ctx := context.WithValue(r.Context(), stopKey{}, s.stopCtx.Done())
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Addr returns the server's host:port (always 127.0.0.1:<port>).
func (s *Server) Addr() string { return s.Listener.Addr().String() }

// Conns returns how many TCP connections the server has accepted so far.
func (s *Server) Conns() int64 { return s.conns.Load() }

// Requests returns how many requests have reached the handler so far.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Active returns how many handlers are running right now.
func (s *Server) Active() int64 { return s.active.Load() }

// MaxActive returns the highest number of handlers that ran at once.
func (s *Server) MaxActive() int64 { return s.maxActive.Load() }

type stopKey struct{}

// Stopped returns the stop channel of the [Server] serving r; it is closed
// when the test's cleanup begins. For a request not served by a [Server] it
// returns nil (a channel that never fires), so selecting on it is always safe.
func Stopped(r *http.Request) <-chan struct{} {
	ch, _ := r.Context().Value(stopKey{}).(<-chan struct{})
	return ch
}

// Wait blocks for d, or until r's client goes away, or until the serving
// [Server] stops, whichever comes first. It reports whether the full d
// elapsed. Custom handlers should wait with it instead of time.Sleep.
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

// waitForever blocks until r's client goes away or the server stops.
func waitForever(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-Stopped(r):
	}
}

// abort ends the current handler and drops the connection without sending a
// (further) response; net/http recovers http.ErrAbortHandler silently.
func abort() {
	panic(http.ErrAbortHandler)
}
