// Package policy is the one owner of outbound's retry policy: which
// statuses are temporary, what the breaker counts as the upstream failing,
// how Retry-After is read and how long to back off. The registry (retry
// and breaker stages) and the adapters (StatusError.Temporary, Degradable)
// derive their behaviour from it, so they cannot disagree. It is internal:
// the rules are documented in the README, the code is not API.
package policy

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/outbound-go/outbound/config"
)

// TemporaryStatus reports whether a status says "not now" rather than
// "no": 408, 429, 500, 502, 503 and 504. These, and transport errors, are
// the failures a retry may cure: the registry retries them, and adapters
// call them Temporary (a fallback may serve the caller meanwhile). Every
// other status is an answer the caller gets as is, 501, 505 and other 5xx
// included: the same request would get the same answer.
func TemporaryStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// ServerRetry reads the server's own word on retrying a response, which
// outbound honours over the status:
//
//   - X-Should-Retry (sent by OpenAI's and other Stainless-generated
//     APIs) or Stripe-Should-Retry "false": the response is the answer, even
//     a temporary status; no retry (the SDKs do the same). Either header
//     saying "false" wins over the other saying "true".
//   - "true": the response may be retried even when its status is not
//     temporary (Stripe's 409 lock_timeout), but only for a request that is
//     safe to replay: a safe method or one carrying an Idempotency-Key. A
//     server cannot make a bare POST replayable.
//   - absent or any other value: said is false, and the status decides
//     ([TemporaryStatus]).
//
// The breaker does not read these headers: it judges the upstream by the
// status ([UpstreamFailure]).
func ServerRetry(h http.Header) (retry, said bool) {
	for _, k := range [...]string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch h.Get(k) {
		case "false":
			return false, true
		case "true":
			retry, said = true, true
		}
	}
	return retry, said
}

// RetryStatus reports whether a response may be retried: a temporary
// status the server did not say "false" on, or an error status (4xx, 5xx)
// it said "true" on ([ServerRetry]). Whether the request may be replayed
// at all is the caller's rule, not the response's.
func RetryStatus(code int, h http.Header) bool {
	if code < 400 {
		return false // an answer, whatever the headers say
	}
	if retry, said := ServerRetry(h); said {
		return retry
	}
	return TemporaryStatus(code)
}

// UpstreamFailure reports whether the breaker counts a status as a failure
// of the upstream: every temporary status, and every other 5xx (501, 505,
// 507, ...), which a retry cannot cure but which still says the upstream
// is failing. 4xx but 408 and 429 are the caller's mistakes: successes.
func UpstreamFailure(code int) bool {
	return TemporaryStatus(code) || code >= 500
}

// ParseRetryAfter parses a Retry-After value, in delay-seconds or as an
// HTTP-date, relative to now. ok is false for a missing or malformed
// value; a date in the past gives 0; a delay too long for a Duration gives
// the longest Duration (still a valid hint, longer than any limit).
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		// delay-seconds is 1*DIGIT with no upper bound.
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

// Backoff returns the wait before retry n (1 for the first retry): full
// jitter over min(limit, base * 2^(n-1)).
func Backoff(base, limit time.Duration, n int) time.Duration {
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

// Plan applies the policy to a temporary failure of attempt n (resp, or
// nil for an error): the wait before the next attempt (Retry-After, else
// backoff with full jitter), the upstream's hint (0: none), and whether
// no attempt may follow (last, when retries ran out). A hint longer than
// RETRY_AFTER_MAX makes this attempt the last: the caller gets the
// response. The server's "do not retry" (X-Should-Retry,
// Stripe-Should-Retry) makes it the last too.
func Plan(resp *http.Response, c config.Client, n int, lastAttempt bool) (wait, hint time.Duration, last bool) {
	last = lastAttempt || (resp != nil && !RetryStatus(resp.StatusCode, resp.Header))
	if resp != nil {
		if ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			if ra > c.RetryAfterMax {
				return 0, 0, true
			}
			wait, hint = ra, ra
		}
	}
	if !last && wait == 0 {
		wait = Backoff(c.BackoffBase, c.BackoffMax, n)
	}
	return wait, hint, last
}

// Replayable reports whether req may be sent more than once (retried,
// hedged): a safe method or an Idempotency-Key, and a body that can be
// produced again.
func Replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, "":
	default:
		if req.Header.Get("Idempotency-Key") == "" {
			return false
		}
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// Sleep waits d or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
