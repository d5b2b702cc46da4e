package testutil

import (
	"context"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/outboundtest"
)

// SlowHeaders returns a handler that never writes a response: it waits until
// the client goes away or the server stops, then drops the connection. Use it
// to trigger response-header timeouts (http.Transport.ResponseHeaderTimeout
// or a context deadline). It is an [outboundtest.Hang] never released.
func SlowHeaders() http.Handler { return outboundtest.NewHang(nil) }

// Trickle is [outboundtest.Trickle]: 200 headers at once, then one body
// byte every interval until the client goes away or the server stops.
func Trickle(interval time.Duration) http.Handler { return outboundtest.Trickle(interval) }

// Reset is [outboundtest.Reset]: the connection is reset (RST) instead of
// answered, so the client sees syscall.ECONNRESET.
func Reset() http.Handler { return outboundtest.Reset() }

// EOF is [outboundtest.EOF]: the connection is closed (FIN) without a
// byte of response, so the client sees io.EOF.
func EOF() http.Handler { return outboundtest.EOF() }

// Gate parks every request until [Gate.Open] is called (or the client goes
// away / the server stops), then serves Resp: an [outboundtest.Hang] under
// the names outbound's own tests use. It is safe for concurrent use.
type Gate struct {
	// Resp is served to every request once the gate is open.
	Resp Resp

	hang *outboundtest.Hang
}

// NewGate returns a closed gate that will answer with resp once opened.
func NewGate(resp Resp) *Gate {
	g := &Gate{Resp: resp}
	g.hang = outboundtest.NewHang(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.Resp.ServeHTTP(w, r)
	}))
	return g
}

// ServeHTTP parks the request until the gate opens, then serves g.Resp. If
// the client goes away or the server stops first, the response is aborted.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.hang.ServeHTTP(w, r) }

// Open releases every parked request and lets all future ones through.
// Calling it more than once is harmless.
func (g *Gate) Open() { g.hang.Release() }

// Parked returns how many requests are waiting at the gate right now.
func (g *Gate) Parked() int { return g.hang.Waiting() }

// WaitParked blocks until at least n requests are parked at the gate, or ctx
// ends (returning ctx.Err()).
func (g *Gate) WaitParked(ctx context.Context, n int) error { return g.hang.WaitFor(ctx, n) }
