package testutil

import (
	"net/http"
	"testing"
	"time"

	"github.com/outbound-go/outbound/outboundtest"
)

// Server is an [outboundtest.Upstream] (an *httptest.Server on 127.0.0.1
// that counts connections, requests and handlers in flight) under the
// names outbound's own tests use. Its cleanup releases waiting handlers
// before it closes, so they can never block the test's teardown.
type Server struct {
	*outboundtest.Upstream
}

// NewServer starts an HTTP/1.1 server on 127.0.0.1:0 serving h, and closes it
// in t.Cleanup.
func NewServer(t testing.TB, h http.Handler) *Server {
	t.Helper()
	return &Server{outboundtest.NewUpstream(t, h)}
}

// NewTLSServer is [NewServer] with TLS (httptest's self-signed certificate;
// trust it via Server.Certificate()).
func NewTLSServer(t testing.TB, h http.Handler) *Server {
	t.Helper()
	return &Server{outboundtest.NewTLSUpstream(t, h)}
}

// Active returns how many handlers are running right now
// ([outboundtest.Upstream.InFlight]).
func (s *Server) Active() int64 { return s.InFlight() }

// MaxActive returns the highest number of handlers that ran at once
// ([outboundtest.Upstream.MaxInFlight]).
func (s *Server) MaxActive() int64 { return s.MaxInFlight() }

// Stopped is [outboundtest.Stopped].
func Stopped(r *http.Request) <-chan struct{} { return outboundtest.Stopped(r) }

// Wait is [outboundtest.Wait].
func Wait(r *http.Request, d time.Duration) bool { return outboundtest.Wait(r, d) }
