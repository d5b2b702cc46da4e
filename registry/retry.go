package registry

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/outbound-go/outbound/internal/drain"
)

// drainClose drains resp's body within drain's size and time bounds and
// closes it, so that its connection can go back to the pool before a
// retry; a body that stalls costs its connection, not the call's time.
func drainClose(resp *http.Response) {
	_ = drain.Close(resp.Body, resp.ContentLength, nil)
}

// retryableStatus reports whether a status is temporary: 408, 429, 500,
// 502, 503, 504.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// replayable reports whether req may be sent more than once: a safe
// method or an Idempotency-Key, and a body that can be produced again.
func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, "":
	default:
		if req.Header.Get("Idempotency-Key") == "" {
			return false
		}
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// backoff returns the wait before retry n (1 for the first retry): full
// jitter over min(max, base * 2^(n-1)).
func backoff(base, limit time.Duration, n int) time.Duration {
	ceil := limit
	if n-1 < 32 {
		if d := base << (n - 1); d > 0 && d < limit {
			ceil = d
		}
	}
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil + 1)
}

// ParseRetryAfter parses a Retry-After value, in delay-seconds or as an
// HTTP-date, relative to now. ok is false for a missing or malformed
// value; a date in the past gives 0.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		// delay-seconds is 1*DIGIT with no upper bound: a value too
		// large for a Duration is the longest Duration, still a valid
		// hint (longer than any RETRY_AFTER_MAX).
		const maxSec = int64(math.MaxInt64 / time.Second)
		var n int64
		for i := 0; i < len(v); i++ {
			if v[i] < '0' || v[i] > '9' {
				return 0, false
			}
			if n = n*10 + int64(v[i]-'0'); n > maxSec {
				n = maxSec + 1
			}
		}
		if n > maxSec {
			return math.MaxInt64, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d = t.Sub(now); d < 0 {
		d = 0
	}
	return d, true
}

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
