// Retry budget: a system's retries are bounded to a fraction of its
// recent calls, as gRPC's retry throttling does with tokens, so that
// retries cannot turn an outage into a storm (RETRY_BUDGET_RATIO and
// RETRY_BUDGET_MIN_PER_SEC). The retry and hedge stages spend it.

package registry

import (
	"sync"
	"time"
)

// retryBudget is a token bucket: each call deposits ratio tokens, each retry
// (or hedge) takes one, and minPerSec tokens a second are always added.
// The bucket holds at most max(20, 2*minPerSec) tokens and starts full,
// so a quiet period cannot bank a storm. A retryBudget is safe for
// concurrent use.
type retryBudget struct {
	ratio     float64
	perSec    float64
	maxTokens float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// newRetryBudget returns a full bucket.
func newRetryBudget(ratio float64, minPerSec int) *retryBudget {
	m := max(20, 2*float64(minPerSec))
	return &retryBudget{ratio: ratio, perSec: float64(minPerSec), maxTokens: m, tokens: m, last: time.Now()}
}

func (b *retryBudget) refill(now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.maxTokens, b.tokens+el.Seconds()*b.perSec)
		b.last = now
	}
}

// Call records one call.
func (b *retryBudget) Call(now time.Time) {
	b.mu.Lock()
	b.refill(now)
	b.tokens = min(b.maxTokens, b.tokens+b.ratio)
	b.mu.Unlock()
}

// Retry takes a token for one retry, if there is one.
func (b *retryBudget) Retry(now time.Time) bool {
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
func (b *retryBudget) Refund() {
	b.mu.Lock()
	b.tokens = min(b.maxTokens, b.tokens+1)
	b.mu.Unlock()
}
