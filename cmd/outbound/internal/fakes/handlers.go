package fakes

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// The rhythm of the slow and the flaky fakes.
const (
	// catalog answers after a uniform 200-800ms; the demo's read timeout
	// for it (700ms) cuts the slowest sixth.
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
func (u *Upstreams) inventory(w http.ResponseWriter, r *http.Request) {
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
func (u *Upstreams) catalog(w http.ResponseWriter, r *http.Request) {
	delay := catalogMinDelay + rand.N(catalogMaxDelay-catalogMinDelay)
	if !u.wait(r, delay) {
		panic(http.ErrAbortHandler) // the client gave up: break the connection
	}
	writeJSON(w, http.StatusOK, map[string]any{"isbn": r.PathValue("isbn"), "title": "A Book"})
}

// storming reports whether payments is in a 503 storm at t.
func (u *Upstreams) storming(t time.Time) bool {
	phase := t.Sub(u.start) % paymentsCycle
	return phase >= paymentsStormFrom && phase < paymentsStormTo
}

// payments registers payments idempotently: the payment ID is derived
// from the Idempotency-Key, so a replay gets the same ID.
func (u *Upstreams) payments(w http.ResponseWriter, r *http.Request) {
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
	case u.storming(time.Now()):
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
func (u *Upstreams) shipping(_ http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-u.stop:
	}
	panic(http.ErrAbortHandler) // break the connection: no made-up answer
}
