package registry

import (
	"sync"
	"time"
)

// retryBudget limits retries to a fraction of recent calls plus a floor
// per second, as gRPC's retry throttling does with tokens: each call
// deposits ratio tokens, each retry takes one, and minPerSec tokens a
// second are always added. The bucket holds at most max(20, 2*minPerSec)
// tokens, so a quiet period cannot bank a storm.
type retryBudget struct {
	ratio     float64
	perSec    float64
	maxTokens float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

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

// call records one call.
func (b *retryBudget) call(now time.Time) {
	b.mu.Lock()
	b.refill(now)
	b.tokens = min(b.maxTokens, b.tokens+b.ratio)
	b.mu.Unlock()
}

// retry takes a token for one retry, if there is one.
func (b *retryBudget) retry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
