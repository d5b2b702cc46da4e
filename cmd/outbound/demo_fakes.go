package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The demo's fake upstreams, one per system, each on its own 127.0.0.1
// port, so each system has its own host and connection pool as real ones
// would.
const (
	// catalog answers after a uniform 200-800ms; its read timeout (700ms)
	// cuts the slowest sixth.
	catalogMinDelay = 200 * time.Millisecond
	catalogMaxDelay = 800 * time.Millisecond
	// payments runs in cycles of paymentsCycle: healthy, then a storm of
	// 503s from paymentsStormFrom to paymentsStormTo, then healthy again;
	// outside storms paymentsRateLimited of the requests get 429 with
	// Retry-After: 1.
	paymentsCycle       = 10 * time.Second
	paymentsStormFrom   = 2 * time.Second
	paymentsStormTo     = 5 * time.Second
	paymentsRateLimited = 0.08
)

// fake is one embedded upstream.
type fake struct {
	name string
	role string // what it does, in a few words
	url  string
	srv  *http.Server
}

// fakes are the demo's upstreams. Close stops them all.
type fakes struct {
	list    []*fake
	start   time.Time
	stop    chan struct{} // closed by Close: waiting handlers give up
	serving sync.WaitGroup
}

// startFakes starts the four upstreams on 127.0.0.1 and never on any
// other address.
func startFakes() (*fakes, error) {
	f := &fakes{start: time.Now(), stop: make(chan struct{})}
	specs := []struct {
		name, role, pattern string
		h                   http.HandlerFunc
	}{
		{"inventory", "healthy: answers at once", "GET /stock/{isbn}", f.inventory},
		{"catalog", "slow: 200-800ms per answer", "GET /books/{isbn}", f.catalog},
		{"payments", "flaky: 503 storms, 429 + Retry-After", "POST /payments", f.payments},
		{"shipping", "hangs: never sends a response", "GET /quotes/{isbn}", f.shipping},
	}
	quiet := log.New(io.Discard, "", 0) // aborted requests are the point, not news
	for _, s := range specs {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("fake %s: %w", s.name, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc(s.pattern, s.h)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet}
		f.list = append(f.list, &fake{name: s.name, role: s.role, url: "http://" + ln.Addr().String(), srv: srv})
		f.serving.Add(1)
		go func() {
			defer f.serving.Done()
			_ = srv.Serve(ln) // returns ErrServerClosed at Close
		}()
	}
	return f, nil
}

// url returns the base URL of the named fake.
func (f *fakes) url(name string) string {
	for _, fk := range f.list {
		if fk.name == name {
			return fk.url
		}
	}
	return ""
}

// role returns what the named fake does.
func (f *fakes) role(name string) string {
	for _, fk := range f.list {
		if fk.name == name {
			return fk.role
		}
	}
	return ""
}

// Close releases every waiting handler, shuts the servers down and waits
// until no goroutine of theirs is left.
func (f *fakes) Close() {
	select {
	case <-f.stop:
		return
	default:
		close(f.stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, fk := range f.list {
		if err := fk.srv.Shutdown(ctx); err != nil {
			_ = fk.srv.Close()
		}
	}
	f.serving.Wait()
}

// wait waits d, or until the client goes away or the fakes stop; it
// reports whether d passed.
func (f *fakes) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-f.stop:
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// isbnDigits returns isbn without hyphens if it is 10 or 13 digits.
func isbnDigits(isbn string) (string, bool) {
	d := strings.ReplaceAll(isbn, "-", "")
	if len(d) != 10 && len(d) != 13 {
		return "", false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return d, true
}

// inventory knows every ISBN of 10 or 13 digits: one ending in 0 is sold
// out, the others have 1-20 copies.
func (f *fakes) inventory(w http.ResponseWriter, r *http.Request) {
	isbn := r.PathValue("isbn")
	d, ok := isbnDigits(isbn)
	if !ok {
		http.Error(w, "unknown isbn", http.StatusNotFound)
		return
	}
	n := 0
	if d[len(d)-1] != '0' {
		sum := 0
		for _, c := range d {
			sum += int(c - '0')
		}
		n = sum%20 + 1
	}
	writeJSON(w, http.StatusOK, map[string]any{"isbn": isbn, "available": n})
}

// catalog answers every ISBN, slowly.
func (f *fakes) catalog(w http.ResponseWriter, r *http.Request) {
	delay := catalogMinDelay + rand.N(catalogMaxDelay-catalogMinDelay)
	if !f.wait(r, delay) {
		panic(http.ErrAbortHandler) // the client gave up: break the connection
	}
	writeJSON(w, http.StatusOK, map[string]any{"isbn": r.PathValue("isbn"), "title": "A Book"})
}

// storming reports whether payments is in a 503 storm at t.
func (f *fakes) storming(t time.Time) bool {
	phase := t.Sub(f.start) % paymentsCycle
	return phase >= paymentsStormFrom && phase < paymentsStormTo
}

// payments registers payments idempotently: the payment ID is derived
// from the Idempotency-Key, so a replay gets the same ID.
func (f *fakes) payments(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	var in struct {
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&in); err != nil || key == "" || in.AmountCents <= 0 {
		http.Error(w, "want a JSON body with order_id and amount_cents, and an Idempotency-Key", http.StatusBadRequest)
		return
	}
	switch {
	case f.storming(time.Now()):
		http.Error(w, "provider maintenance", http.StatusServiceUnavailable)
		return
	case rand.Float64() < paymentsRateLimited:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	h := fnv.New64a()
	_, _ = io.WriteString(h, key)
	writeJSON(w, http.StatusCreated, map[string]any{"id": fmt.Sprintf("pay_%016x", h.Sum64()), "status": "authorized"})
}

// shipping reads the request and never answers: the client's read
// timeout has to end the wait.
func (f *fakes) shipping(_ http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.stop:
	}
	panic(http.ErrAbortHandler) // break the connection: no made-up answer
}
