package registry

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestBucketStartsFullRefillsAndCaps checks the token bucket on synctest's fake clock.
func TestBucketStartsFullRefillsAndCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		take := func(b *retryBudget) int {
			n := 0
			for b.Retry(time.Now()) {
				n++
				if n > 1e6 {
					t.Fatal("the bucket never empties")
				}
			}
			return n
		}

		// Starts full: max(20, 2*minPerSec) tokens.
		b := newRetryBudget(0.2, 10)
		if got := take(b); got != 20 {
			t.Errorf("a new bucket allowed %d retries, want 20", got)
		}
		// Each call deposits ratio: 5 calls buy one retry.
		for range 5 {
			b.Call(time.Now())
		}
		if got := take(b); got != 1 {
			t.Errorf("5 calls at ratio 0.2 bought %d retries, want 1", got)
		}
		for range 4 {
			b.Call(time.Now())
		}
		if got := take(b); got != 0 {
			t.Errorf("4 calls at ratio 0.2 bought %d retries, want 0", got)
		}
		// The floor: minPerSec tokens a second, whatever the calls.
		time.Sleep(time.Second)
		if got := take(b); got != 10 {
			t.Errorf("1s at 10/s bought %d retries, want 10", got)
		}
		time.Sleep(1500 * time.Millisecond)
		if got := take(b); got != 15 {
			t.Errorf("1.5s at 10/s bought %d retries, want 15", got)
		}
		// A quiet hour cannot bank a storm: the bucket holds 20.
		time.Sleep(time.Hour)
		if got := take(b); got != 20 {
			t.Errorf("after an hour: %d retries, want the bucket size 20", got)
		}
		// Nor can a burst of calls.
		for range 10000 {
			b.Call(time.Now())
		}
		if got := take(b); got != 20 {
			t.Errorf("after 10,000 calls: %d retries, want the bucket size 20", got)
		}
		// The clock going backwards adds nothing.
		b.last = b.last.Add(time.Hour)
		if b.Retry(time.Now()) {
			t.Error("a retry was allowed on an empty bucket with the clock behind")
		}

		// No floor: only calls refill.
		z := newRetryBudget(0.5, 0)
		take(z)
		time.Sleep(time.Hour)
		if z.Retry(time.Now()) {
			t.Error("minPerSec 0: time alone refilled the bucket")
		}
		z.Call(time.Now())
		z.Call(time.Now())
		if got := take(z); got != 1 {
			t.Errorf("minPerSec 0: 2 calls at 0.5 bought %d retries, want 1", got)
		}

		// A high floor sizes the bucket at 2 seconds of it.
		h := newRetryBudget(0.2, 100)
		if got := take(h); got != 200 {
			t.Errorf("minPerSec 100: a new bucket allowed %d retries, want 200", got)
		}
	})
}
