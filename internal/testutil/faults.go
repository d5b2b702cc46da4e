package testutil

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// SlowHeaders returns a handler that never writes a response: it waits until
// the client goes away or the server stops, then drops the connection. Use it
// to trigger response-header timeouts (http.Transport.ResponseHeaderTimeout
// or a context deadline).
func SlowHeaders() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		waitForever(r)
		abort()
	})
}

// Trickle returns a handler that sends 200 headers (flushed at once), then
// one body byte ('x') every interval, forever, until the client goes away or
// the server stops. Use it to trigger body-read / idle-read timeouts; with a
// huge interval (e.g. time.Hour) the body simply stalls after the headers.
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

// Reset returns a handler that reads the request, then hijacks the
// connection and closes it with SO_LINGER 0, so the kernel sends an RST and
// the client sees "connection reset by peer" (syscall.ECONNRESET) instead of
// a response.
func Reset() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn := hijack(w, r)
		raw := conn
		if tc, ok := conn.(*tls.Conn); ok {
			raw = tc.NetConn()
		}
		if tcp, ok := raw.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = conn.Close()
	})
}

// EOF returns a handler that reads the request, then closes the connection
// cleanly (FIN) without writing a byte, so the client sees io.EOF (the
// "server closed the connection without answering" case).
func EOF() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = hijack(w, r).Close()
	})
}

// hijack drains the request body (so closing the socket doesn't RST because
// of unread data) and takes over the connection.
func hijack(w http.ResponseWriter, r *http.Request) net.Conn {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): dropping the stream is the closest
		// equivalent.
		abort()
	}
	return conn
}

// Gate is a handler that parks every request until [Gate.Open] is called
// (or the client goes away / the server stops), then serves Resp. It lets a
// test hold exactly N requests in flight, e.g. to saturate a bulkhead or to
// force N concurrent connections. It is safe for concurrent use.
type Gate struct {
	// Resp is served to every request once the gate is open.
	Resp Resp

	mu      sync.Mutex
	parked  int
	changed chan struct{} // closed and replaced whenever parked changes
	open    chan struct{}
	once    sync.Once
}

// NewGate returns a closed gate that will answer with resp once opened.
func NewGate(resp Resp) *Gate {
	return &Gate{Resp: resp, changed: make(chan struct{}), open: make(chan struct{})}
}

// ServeHTTP parks the request until the gate opens, then serves g.Resp. If
// the client goes away or the server stops first, the response is aborted.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.add(1)
	select {
	case <-g.open:
		g.add(-1)
	case <-r.Context().Done():
		g.add(-1)
		abort()
	case <-Stopped(r):
		g.add(-1)
		abort()
	}
	g.Resp.serve(w, r)
}

func (g *Gate) add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parked += d
	close(g.changed)
	g.changed = make(chan struct{})
}

// Open releases every parked request and lets all future ones through.
// Calling it more than once is harmless.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

// Parked returns how many requests are waiting at the gate right now.
func (g *Gate) Parked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.parked
}

// WaitParked blocks until at least n requests are parked at the gate, or ctx
// ends (returning ctx.Err()).
func (g *Gate) WaitParked(ctx context.Context, n int) error {
	for {
		g.mu.Lock()
		parked, changed := g.parked, g.changed
		g.mu.Unlock()
		if parked >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
