// Package fakes is the demo's embedded fake upstreams: one HTTP server per
// system, each on its own 127.0.0.1 port so that each system has its own
// host and connection pool as real ones would, each failing in its own
// way (healthy, slow, flaky, hanging).
package fakes

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// The systems the fakes stand for, in the order of [Names].
const (
	Inventory = "inventory"
	Catalog   = "catalog"
	Payments  = "payments"
	Shipping  = "shipping"
)

// Names returns the systems the fakes stand for, in the order the demo
// shows them.
func Names() []string { return []string{Inventory, Catalog, Payments, Shipping} }

// fake is one upstream.
type fake struct {
	name string
	role string // what it does, in a few words
	url  string
	srv  *http.Server
}

// Upstreams are the running fakes. Close stops them all.
type Upstreams struct {
	list    []*fake
	start   time.Time     // the origin of the payments storms' cycle
	stop    chan struct{} // closed by Close: waiting handlers give up
	serving sync.WaitGroup
}

// route is what one fake serves.
type route struct {
	name, role, pattern string
	handle              http.HandlerFunc
}

func (u *Upstreams) routes() []route {
	return []route{
		{Inventory, "healthy: answers at once", "GET /stock/{isbn}", u.inventory},
		{Catalog, "slow: 200-800ms per answer", "GET /books/{isbn}", u.catalog},
		{Payments, "flaky: 503 storms, 429 + Retry-After", "POST /payments", u.payments},
		{Shipping, "hangs: never sends a response", "GET /quotes/{isbn}", u.shipping},
	}
}

// Start starts the four upstreams on 127.0.0.1, and never on any other
// address.
func Start() (*Upstreams, error) {
	u := &Upstreams{start: time.Now(), stop: make(chan struct{})}
	quiet := log.New(io.Discard, "", 0) // aborted requests are the point, not news
	for _, r := range u.routes() {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("fake %s: %w", r.name, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc(r.pattern, r.handle)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet}
		u.list = append(u.list, &fake{name: r.name, role: r.role, url: "http://" + ln.Addr().String(), srv: srv})
		u.serving.Go(func() { _ = srv.Serve(ln) }) // ErrServerClosed at Close
	}
	return u, nil
}

// URL returns the base URL of the named fake, or "" for none.
func (u *Upstreams) URL(name string) string {
	if f := u.find(name); f != nil {
		return f.url
	}
	return ""
}

// Role says what the named fake does, or "" for none.
func (u *Upstreams) Role(name string) string {
	if f := u.find(name); f != nil {
		return f.role
	}
	return ""
}

func (u *Upstreams) find(name string) *fake {
	for _, f := range u.list {
		if f.name == name {
			return f
		}
	}
	return nil
}

// Close releases every waiting handler, shuts the servers down and waits
// until no goroutine of theirs is left. A second Close does nothing.
func (u *Upstreams) Close() {
	select {
	case <-u.stop:
		return
	default:
		close(u.stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, f := range u.list {
		if err := f.srv.Shutdown(ctx); err != nil {
			_ = f.srv.Close()
		}
	}
	u.serving.Wait()
}

// wait waits d, or until the client goes away or the fakes stop; it
// reports whether d passed.
func (u *Upstreams) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-u.stop:
	}
	return false
}
