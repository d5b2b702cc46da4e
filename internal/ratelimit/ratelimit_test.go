package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/config"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func limited(t testing.TB, limit string, burst int) config.Rate {
	t.Helper()
	r, err := config.ParseRate(limit)
	if err != nil {
		t.Fatal(err)
	}
	r.Burst = burst
	return r
}

// TestLocalSpendsTheBurstThenTheRate checks the token bucket on
// synctest's clock: the burst goes at once, then one token per 1/rate;
// with no wait allowed the next request is refused at once, with a wait
// it gets its token when it comes.
func TestLocalSpendsTheBurstThenTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal(limited(t, "10/s", 3))
		ctx := context.Background()
		for i := range 3 {
			if err := l.Wait(ctx, 0); err != nil {
				t.Fatalf("burst request %d: %v", i, err)
			}
		}
		if err := l.Wait(ctx, 0); !errors.Is(err, ErrLimited) {
			t.Fatalf("fourth request without wait: %v, want ErrLimited", err)
		}
		start := time.Now()
		if err := l.Wait(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("waited %v for a token at 10/s, want 100ms", got)
		}
		if err := l.Wait(ctx, 50*time.Millisecond); !errors.Is(err, ErrLimited) {
			t.Errorf("a wait longer than allowed: %v, want ErrLimited at once", err)
		}
		// The refused request gave its reservation back: the next token
		// is still 100ms away, not 200ms.
		start = time.Now()
		if err := l.Wait(ctx, time.Second); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Errorf("after a refusal: %v after %v, want the token in 100ms", err, time.Since(start))
		}
	})
}

// TestLocalNeverWaitsPastTheCallersDeadline checks that a request whose
// token comes after its caller's deadline is refused at once.
func TestLocalNeverWaitsPastTheCallersDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal(limited(t, "1/s", 1))
		_ = l.Wait(context.Background(), 0)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := l.Wait(ctx, 10*time.Second); !errors.Is(err, ErrLimited) || time.Since(start) != 0 {
			t.Errorf("%v after %v, want ErrLimited at once", err, time.Since(start))
		}
	})
}

// TestPauseRefusesUntilItEnds checks that a pause refuses requests that
// cannot wait for its end, holds those that can, and that a shorter pause
// does not cut a longer one.
func TestPauseRefusesUntilItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal(limited(t, "1000/s", 50))
		ctx := context.Background()
		l.Pause(time.Now().Add(2 * time.Second))
		l.Pause(time.Now().Add(time.Second))
		if err := l.Wait(ctx, time.Second); !errors.Is(err, ErrLimited) {
			t.Fatalf("paused 2s, wait 1s: %v, want ErrLimited", err)
		}
		if st := l.Status(); !st.PausedUntil.Equal(time.Now().Add(2 * time.Second)) {
			t.Errorf("Status paused until %v", st.PausedUntil)
		}
		start := time.Now()
		if err := l.Wait(ctx, 3*time.Second); err != nil || time.Since(start) != 2*time.Second {
			t.Errorf("%v after %v, want the token when the pause ends (2s)", err, time.Since(start))
		}
		if err := l.Wait(ctx, 0); err != nil {
			t.Errorf("after the pause: %v", err)
		}
	})
}

// TestTokenAtHandAllocatesNothing checks the cost of the common case.
func TestTokenAtHandAllocatesNothing(t *testing.T) {
	l := NewLocal(limited(t, "1000000/s", 100000))
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = l.Wait(ctx, 0) }); n != 0 {
		t.Errorf("%v allocations per token at hand", n)
	}
}

func TestPauseFromTheUpstreamsWord(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		name   string
		status int
		h      http.Header
		want   time.Duration
	}{
		{"429 Retry-After seconds", 429, hdr("Retry-After", "2"), 2 * time.Second},
		{"503 Retry-After date", 503, hdr("Retry-After", now.Add(3*time.Second).Format(http.TimeFormat)), 3 * time.Second},
		{"200 with Retry-After is not a pause", 200, hdr("Retry-After", "2"), 0},
		{"429 without a word", 429, hdr(), 0},
		{"Retry-After past the bound", 429, hdr("Retry-After", "3600"), 15 * time.Second},
		{"Retry-After absurd", 429, hdr("Retry-After", "99999999999999999999"), 15 * time.Second},
		{"RateLimit structured", 200, hdr("RateLimit", `"default";r=0;t=4`), 4 * time.Second},
		{"RateLimit structured, left", 200, hdr("RateLimit", `"default";r=5;t=4`), 0},
		{"RateLimit second item exhausted", 200, hdr("RateLimit", `"a";r=3;t=1, "b";r=0;t=6`), 6 * time.Second},
		{"RateLimit first draft", 200, hdr("RateLimit", "limit=100, remaining=0, reset=7"), 7 * time.Second},
		{"RateLimit-Remaining and -Reset", 429, hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "5"), 5 * time.Second},
		{"X-RateLimit Unix reset", 200, hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1796126410"), 10 * time.Second},
		{"X-RateLimit reset in the past", 200, hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1796126390"), 0},
		{"X-RateLimit left", 200, hdr("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "9"), 0},
		{"garbage", 429, hdr("RateLimit", "r=;t=x", "X-RateLimit-Remaining", "zero", "Retry-After", "soon"), 0},
		{"negative", 200, hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "-5"), 0},
	} {
		got, ok := PauseFrom(&http.Response{StatusCode: c.status, Header: c.h}, now, 15*time.Second)
		if got != c.want || ok != (c.want > 0) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, ok, c.want)
		}
	}
}

func FuzzPauseFrom(f *testing.F) {
	for _, v := range []string{`"default";r=0;t=4`, "limit=100, remaining=0, reset=7", "r=0;t=99999999999", ";;,,=", "t=1;r=0"} {
		f.Add(v, "0", "1796126410", "2")
	}
	f.Fuzz(func(t *testing.T, rl, rem, reset, ra string) {
		h := http.Header{"Ratelimit": {rl}, "X-Ratelimit-Remaining": {rem}, "X-Ratelimit-Reset": {reset}, "Retry-After": {ra}}
		d, ok := PauseFrom(&http.Response{StatusCode: 429, Header: h}, time.Unix(1796126400, 0), time.Minute)
		if d < 0 || d > time.Minute || ok != (d > 0) {
			t.Fatalf("PauseFrom = %v, %v: out of bounds", d, ok)
		}
	})
}
