package outboundtest

import (
	"context"
	"net/http"
	"sync"
)

// Hang is a handler that holds every request until [Hang.Release], then
// serves it with its next handler. A request whose client goes away, or
// that is still held when the upstream stops, is aborted. It lets a test
// keep exactly N calls in flight (a full bulkhead, N connections). A Hang
// is safe for concurrent use.
type Hang struct {
	next http.Handler

	mu      sync.Mutex
	waiting int
	changed chan struct{} // closed and replaced whenever waiting changes

	released chan struct{}
	once     sync.Once
}

// NewHang returns a Hang that serves next once released; a nil next
// answers 200 "ok".
func NewHang(next http.Handler) *Hang {
	if next == nil {
		next = Healthy()
	}
	return &Hang{next: next, changed: make(chan struct{}), released: make(chan struct{})}
}

// ServeHTTP holds r until the Hang is released, then serves it.
func (h *Hang) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.add(1)
	select {
	case <-h.released:
		h.add(-1)
	case <-r.Context().Done():
		h.add(-1)
		abort()
	case <-Stopped(r):
		h.add(-1)
		abort()
	}
	h.next.ServeHTTP(w, r)
}

func (h *Hang) add(d int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting += d
	close(h.changed)
	h.changed = make(chan struct{})
}

// Release lets every held request through, and every later one. Calling
// it again is harmless.
func (h *Hang) Release() { h.once.Do(func() { close(h.released) }) }

// Waiting returns how many requests are held now.
func (h *Hang) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting
}

// WaitFor blocks until at least n requests are held, or ctx ends (it then
// returns ctx.Err()).
func (h *Hang) WaitFor(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		waiting, changed := h.waiting, h.changed
		h.mu.Unlock()
		if waiting >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
