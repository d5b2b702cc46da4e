// Package throttle bounds a system's retries to a fraction of its recent
// calls, as gRPC's retry throttling does with tokens, so that retries
// cannot turn an outage into a storm (RETRY_BUDGET_RATIO and
// RETRY_BUDGET_MIN_PER_SEC: the variables keep their first names). It is
// internal: the registry's retry and hedge stages are its users.
package throttle

import (
	"sync"
	"time"
)

// Throttle is a token bucket: each call deposits ratio tokens, each retry
// (or hedge) takes one, and minPerSec tokens a second are always added.
// The bucket holds at most max(20, 2*minPerSec) tokens and starts full,
// so a quiet period cannot bank a storm. A Throttle is safe for
// concurrent use.
type Throttle struct {
	ratio     float64
	perSec    float64
	maxTokens float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// New returns a full bucket.
func New(ratio float64, minPerSec int) *Throttle {
	m := max(20, 2*float64(minPerSec))
	return &Throttle{ratio: ratio, perSec: float64(minPerSec), maxTokens: m, tokens: m, last: time.Now()}
}

func (b *Throttle) refill(now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.maxTokens, b.tokens+el.Seconds()*b.perSec)
		b.last = now
	}
}

// Call records one call.
func (b *Throttle) Call(now time.Time) {
	b.mu.Lock()
	b.refill(now)
	b.tokens = min(b.maxTokens, b.tokens+b.ratio)
	b.mu.Unlock()
}

// Retry takes a token for one retry, if there is one.
func (b *Throttle) Retry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Refund gives back the token of a retry that was taken but never sent.
func (b *Throttle) Refund() {
	b.mu.Lock()
	b.tokens = min(b.maxTokens, b.tokens+1)
	b.mu.Unlock()
}
