package policy

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// One set of temporary statuses, and the breaker's failures derived from
// it.
func TestStatuses(t *testing.T) {
	for code := 100; code < 600; code++ {
		temp := code == 408 || code == 429 || code == 500 || code == 502 || code == 503 || code == 504
		if got := TemporaryStatus(code); got != temp {
			t.Errorf("TemporaryStatus(%d) = %v, want %v", code, got, temp)
		}
		fail := temp || code >= 500
		if got := UpstreamFailure(code); got != fail {
			t.Errorf("UpstreamFailure(%d) = %v, want %v", code, got, fail)
		}
	}
}

// backoff is full jitter: uniform over [0, min(max, base*2^(n-1))], for
// every retry a client can make (RETRIES <= 10, so n <= 10).
func TestBackoffFullJitter(t *testing.T) {
	for _, tc := range []struct{ base, limit time.Duration }{
		{100 * time.Millisecond, 2 * time.Second},
		{5 * time.Millisecond, 20 * time.Millisecond},
		{time.Second, time.Second},
		{time.Nanosecond, time.Hour},
		{time.Hour, 1000 * time.Hour},
	} {
		for n := 1; n <= 10; n++ {
			ceil := tc.limit
			if f := float64(tc.base) * math.Pow(2, float64(n-1)); f < float64(tc.limit) {
				ceil = time.Duration(f)
			}
			var hi time.Duration
			for range 500 {
				d := Backoff(tc.base, tc.limit, n)
				if d < 0 || d > ceil {
					t.Fatalf("Backoff(%v, %v, %d) = %v, want within [0, %v]", tc.base, tc.limit, n, d, ceil)
				}
				hi = max(hi, d)
			}
			// 500 uniform draws all below half the ceiling: chance 2^-500.
			if ceil > 1 && hi < ceil/2 {
				t.Errorf("Backoff(%v, %v, %d): 500 draws all <= %v, want spread over [0, %v]", tc.base, tc.limit, n, hi, ceil)
			}
		}
	}
	if d := Backoff(0, 0, 1); d != 0 {
		t.Errorf("Backoff(0, 0, 1) = %v, want 0", d)
	}
}

// ParseRetryAfter with go-retryablehttp's cases, on a fake clock
// (synctest's bubble starts at 2000-01-01 00:00:00 UTC), so HTTP-dates
// give exact durations.
func TestParseRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if want := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC); !start.Equal(want) {
			t.Fatalf("synctest clock starts at %v, want %v", start, want)
		}
		for _, tc := range []struct {
			in   string
			want time.Duration
			ok   bool
		}{
			{"2", 2 * time.Second, true},
			{"0", 0, true},
			{" 7 ", 7 * time.Second, true},
			{"4294967295", 4294967295 * time.Second, true},
			{"Sat, 01 Jan 2000 00:00:02 GMT", 2 * time.Second, true},              // IMF-fixdate
			{"Saturday, 01-Jan-00 00:01:00 GMT", time.Minute, true},               // RFC 850
			{"Sat Jan  1 01:00:00 2000", time.Hour, true},                         // ANSI C asctime
			{"Fri, 31 Dec 1999 23:59:59 GMT", 0, true},                            // past: 0
			{"Fri, 31 Dec 1999 23:59:00 GMT", 0, true},                            // past: 0
			{"Fri, 31 Dec 9999 23:59:59 GMT", time.Duration(math.MaxInt64), true}, // saturates
			{"", 0, false},
			{"   ", 0, false},
			{"-2", 0, false},
			{"-1", 0, false},
			{"1.5", 0, false},
			{"3s", 0, false},
			{"4294967296", 4294967296 * time.Second, true},               // >= 2^32 is valid
			{"9223372036", 9223372036 * time.Second, true},               // the longest Duration in whole seconds
			{"9223372037", time.Duration(math.MaxInt64), true},           // longer: saturates
			{"99999999999999999999", time.Duration(math.MaxInt64), true}, // saturates, never overflows
			{"1 2", 0, false},
			{"12a", 0, false},
			{"+1", 0, false},
			{"Fri, 32 Dec 1999 23:59:59 GMT", 0, false},
			{"badbadbad", 0, false},
		} {
			d, ok := ParseRetryAfter(tc.in, time.Now())
			if d != tc.want || ok != tc.ok {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, d, ok, tc.want, tc.ok)
			}
		}

		// The same date means less wait as the clock moves on, and none
		// once it has passed.
		const date = "Sat, 01 Jan 2000 00:01:30 GMT"
		time.Sleep(30 * time.Second)
		if d, ok := ParseRetryAfter(date, time.Now()); d != time.Minute || !ok {
			t.Errorf("30s later: ParseRetryAfter(%q) = %v, %v; want 1m0s, true", date, d, ok)
		}
		time.Sleep(2 * time.Minute)
		if d, ok := ParseRetryAfter(date, time.Now()); d != 0 || !ok {
			t.Errorf("after the date: ParseRetryAfter(%q) = %v, %v; want 0, true", date, d, ok)
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"", "-1", "-2", "0", "2", "3", "1.5", "badbadbad",
		"Fri, 31 Dec 1999 23:59:59 GMT", "Fri, 31 Dec 1999 23:59:00 GMT", "Fri, 32 Dec 1999 23:59:59 GMT",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 20x6 00:00:00 GMT", "Thu, 01 Jan 1970 00:00:00 GMT",
		"4294967295", "4294967296", "18446744073709551615", "99999999999999999999999999",
	} {
		f.Add(s)
	}
	now := time.Date(1999, 12, 31, 23, 59, 57, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", v, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", v, d)
		}
		// Any delay-seconds value, however long, is a valid hint.
		if s := strings.TrimSpace(v); s != "" && strings.Trim(s, "0123456789") == "" && !ok {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want a valid delay", v, d)
		}
	})
}

// The server's "do not retry": X-Should-Retry and Stripe-Should-Retry,
// "false" winning over "true".
func TestServerRetry(t *testing.T) {
	for _, tc := range []struct {
		h           map[string]string
		retry, said bool
	}{
		{nil, false, false},
		{map[string]string{"X-Should-Retry": "false"}, false, true},
		{map[string]string{"x-should-retry": "true"}, true, true},
		{map[string]string{"Stripe-Should-Retry": "false"}, false, true},
		{map[string]string{"Stripe-Should-Retry": "true"}, true, true},
		{map[string]string{"X-Should-Retry": "true", "Stripe-Should-Retry": "false"}, false, true},
		{map[string]string{"X-Should-Retry": "false", "Stripe-Should-Retry": "true"}, false, true},
		{map[string]string{"X-Should-Retry": "maybe"}, false, false},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		if retry, said := ServerRetry(h); retry != tc.retry || said != tc.said {
			t.Errorf("ServerRetry(%v) = %v, %v; want %v, %v", tc.h, retry, said, tc.retry, tc.said)
		}
	}
}

func TestRetryStatus(t *testing.T) {
	no := http.Header{"X-Should-Retry": {"false"}}
	yes := http.Header{"Stripe-Should-Retry": {"true"}}
	for _, tc := range []struct {
		code int
		h    http.Header
		want bool
	}{
		{503, nil, true}, {503, no, false}, {429, no, false},
		{409, nil, false}, {409, yes, true}, {200, yes, false}, {302, yes, false},
	} {
		if got := RetryStatus(tc.code, tc.h); got != tc.want {
			t.Errorf("RetryStatus(%d, %v) = %v, want %v", tc.code, tc.h, got, tc.want)
		}
	}
}

// TestSleepWaitsUnlessTheContextEndsFirst checks Sleep on synctest's
// fake clock.
func TestSleepWaitsUnlessTheContextEndsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Sleep(context.Background(), 3*time.Second) || time.Since(start) != 3*time.Second {
			t.Errorf("Sleep(3s) returned false or after %v", time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if Sleep(ctx, time.Hour) || time.Since(start) != time.Second {
			t.Errorf("Sleep(1h) under a 1s deadline returned true or after %v", time.Since(start))
		}
		if Sleep(ctx, 0) {
			t.Error("Sleep(0) on a done context returned true")
		}
	})
}
