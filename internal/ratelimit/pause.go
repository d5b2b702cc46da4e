package ratelimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/outbound-go/outbound/internal/policy"
)

// MaxPause is the longest pause the upstream can ask a system for,
// whatever it says: a value read from outside is bounded like an
// environment variable.
const MaxPause = 5 * time.Minute

// PauseFrom reads the upstream's word on its quota in resp and returns
// how long the system should send nothing: a 429 or a 503 with
// Retry-After (seconds or an HTTP-date), or, on any response, rate-limit
// headers that say nothing is left until a reset (RateLimit of the IETF
// draft, in its structured form "default";r=0;t=10 or its first form
// remaining=0, reset=10, RateLimit-Remaining with RateLimit-Reset, and
// X-RateLimit-Remaining with X-RateLimit-Reset in seconds or as a Unix
// time). The pause is at most bound (the system's CALL_TIMEOUT: no call
// outlives it anyway) and MaxPause; ok is false when resp asks for none.
// Malformed values are ignored.
func PauseFrom(resp *http.Response, now time.Time, bound time.Duration) (d time.Duration, ok bool) {
	h := resp.Header
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if ra, ok := policy.ParseRetryAfter(h.Get("Retry-After"), now); ok {
			d = ra
		}
	}
	if d == 0 {
		d = resetWhenExhausted(h, now)
	}
	d = min(d, bound, MaxPause)
	return d, d > 0
}

// resetWhenExhausted is the time until the reset of a quota the headers
// say is exhausted (nothing remaining), or 0.
func resetWhenExhausted(h http.Header, now time.Time) time.Duration {
	if v := h.Get("RateLimit"); v != "" {
		if d, ok := parseRateLimitField(v); ok {
			return d
		}
	}
	for _, p := range [...]string{"RateLimit-", "X-RateLimit-"} {
		rem, err := strconv.ParseInt(strings.TrimSpace(h.Get(p+"Remaining")), 10, 64)
		if err != nil || rem != 0 {
			continue
		}
		if d, ok := resetIn(h.Get(p+"Reset"), now); ok {
			return d
		}
	}
	return 0
}

// parseRateLimitField reads a RateLimit field: the structured form of
// the draft's later versions, a list of quota items with parameters r
// (remaining) and t (seconds to reset), or its first form, a list of
// key=value (remaining, reset). It returns the time to reset of an item
// with nothing remaining.
func parseRateLimitField(v string) (time.Duration, bool) {
	all, params := map[string]string{}, map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		clear(params)
		for kv := range strings.SplitSeq(item, ";") {
			k, val, found := strings.Cut(strings.TrimSpace(kv), "=")
			if found {
				k, val = strings.ToLower(k), strings.TrimSpace(val)
				params[k], all[k] = val, val
			}
		}
		if d, ok := exhausted(params, "r", "t"); ok {
			return d, true
		}
	}
	return exhausted(all, "remaining", "reset")
}

// exhausted reads the remaining and reset of params: the time to the
// reset when nothing remains.
func exhausted(params map[string]string, remaining, reset string) (time.Duration, bool) {
	rem, okRem := whole(params[remaining])
	t, okReset := whole(params[reset])
	if !okRem || !okReset || rem != 0 || t == 0 {
		return 0, false
	}
	return time.Duration(min(t, int64(MaxPause/time.Second))) * time.Second, true
}

// whole reads a whole number of at least 0.
func whole(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 0
}

// unixReset is where a reset value is taken for a Unix time rather than a
// number of seconds: no API resets a quota three years from now.
const unixReset = 100_000_000

// resetIn reads a reset value: seconds from now, or a Unix time in
// seconds (as GitHub's X-RateLimit-Reset).
func resetIn(v string, now time.Time) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	switch {
	case err != nil || n <= 0:
		return 0, false
	case n >= unixReset:
		d := time.Unix(n, 0).Sub(now)
		return d, d > 0
	}
	return time.Duration(min(n, int64(MaxPause/time.Second))) * time.Second, true
}
