package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/registry"
)

// TestShareWaitsForItsFirstRate checks that a share with no rate yet
// refuses a request that may not wait, and holds one that may until a
// rate comes, which starts with a full bucket; a share that goes to 0
// and comes back does not refill it.
func TestShareWaitsForItsFirstRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newShare("10/s", "fleet")
		ctx := context.Background()
		if err := s.Wait(ctx, 0); !errors.Is(err, registry.ErrRateLimited) {
			t.Fatalf("no rate, no wait: %v, want registry.ErrRateLimited", err)
		}
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- s.Wait(ctx, time.Second) }()
		time.Sleep(100 * time.Millisecond)
		s.SetRate(10, 1)
		if err := <-done; err != nil || time.Since(start) != 100*time.Millisecond {
			t.Errorf("%v after %v, want the token when the rate came (100ms)", err, time.Since(start))
		}
		start = time.Now()
		if err := s.Wait(ctx, 50*time.Millisecond); !errors.Is(err, registry.ErrRateLimited) || time.Since(start) != 0 {
			t.Errorf("next token in 100ms, wait 50ms: %v after %v, want registry.ErrRateLimited at once", err, time.Since(start))
		}
		s.SetRate(0, 0)
		time.Sleep(time.Second)
		s.SetRate(10, 1)
		if err := s.Wait(ctx, 0); !errors.Is(err, registry.ErrRateLimited) {
			t.Errorf("a share back from 0: %v, want an empty bucket (registry.ErrRateLimited)", err)
		}
	})
}

// TestShareGrantEndsByItself: a grant set to end sends nothing once its
// end has passed, even though no one set another (a starved fleet loop
// that runs late): the tokens at hand are not spent, Status shows no
// share, and a request waiting for a token gets one as soon as the next
// end is set, at the rate in force.
func TestShareGrantEndsByItself(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newShare("100/s", "fleet")
		s.SetRate(100, 10)
		s.SetEnd(time.Now().Add(time.Second))
		ctx := context.Background()
		if err := s.Wait(ctx, 0); err != nil {
			t.Fatalf("a grant in force: %v, want a token", err)
		}
		time.Sleep(time.Second)
		if err := s.Wait(ctx, 0); !errors.Is(err, registry.ErrRateLimited) {
			t.Errorf("a grant past its end, 9 tokens at hand: %v, want registry.ErrRateLimited", err)
		}
		if st := s.Status(); st.Share != 0 || st.Tokens != 0 {
			t.Errorf("a grant past its end: Status shows share %v, tokens %v, want 0 and 0", st.Share, st.Tokens)
		}
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- s.Wait(ctx, time.Second) }()
		time.Sleep(100 * time.Millisecond)
		s.SetEnd(time.Now().Add(time.Second)) // the loop renews the same grant
		if err := <-done; err != nil || time.Since(start) != 100*time.Millisecond {
			t.Errorf("%v after %v, want the token when the grant was renewed (100ms)", err, time.Since(start))
		}
		s.SetEnd(time.Time{}) // limit / pods: no end
		time.Sleep(time.Hour)
		if err := s.Wait(ctx, 0); err != nil {
			t.Errorf("a rate without an end, an hour on: %v, want a token", err)
		}
	})
}

// TestShareRateCutBindsAtOnce: 20 requests wait at 100/s when the rate
// is cut to 1/s: from the cut on, the new rate holds. (x/time/rate's own
// Wait would have reserved all 20 at the old rate: sent by 200ms.)
func TestShareRateCutBindsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newShare("100/s", "fleet")
		s.SetRate(100, 1)
		start := time.Now()
		var mu sync.Mutex
		var sent []time.Duration
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if s.Wait(context.Background(), 5*time.Second) == nil {
					mu.Lock()
					sent = append(sent, time.Since(start))
					mu.Unlock()
				}
			})
		}
		time.Sleep(35 * time.Millisecond)
		s.SetRate(1, 1)
		cut := time.Since(start)
		wg.Wait()
		var before, after int
		for _, d := range sent {
			switch {
			case d <= cut:
				before++
			case d < cut+2*time.Second:
				after++
			}
		}
		if before > 4 {
			t.Errorf("%d requests went in the first 35ms at 100/s, want at most 4 (the burst and 3)", before)
		}
		// From the cut at most 1/s: 2 in 2s.
		if after > 2 {
			t.Errorf("%d requests went within 2s of the cut to 1/s, want at most 2 (sent at %v)", after, sent)
		}
		if len(sent) == 0 {
			t.Error("no request went at all")
		}
	})
}

// TestShareTokenPastTheWaitIsRefusedAtOnce checks a rate that cannot
// serve the request within its wait.
func TestShareTokenPastTheWaitIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newShare("1/s", "fleet")
		s.SetRate(1, 1)
		ctx := context.Background()
		if err := s.Wait(ctx, 0); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := s.Wait(ctx, 500*time.Millisecond); !errors.Is(err, registry.ErrRateLimited) || time.Since(start) != 0 {
			t.Errorf("%v after %v, want registry.ErrRateLimited at once", err, time.Since(start))
		}
		dl, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := s.Wait(dl, 5*time.Second); !errors.Is(err, registry.ErrRateLimited) || time.Since(start) != 0 {
			t.Errorf("past the caller's deadline: %v after %v, want registry.ErrRateLimited at once", err, time.Since(start))
		}
		if err := s.Wait(ctx, 2*time.Second); err != nil || time.Since(start) != time.Second {
			t.Errorf("%v after %v, want the token in 1s", err, time.Since(start))
		}
	})
}

// TestShareDemandCountsAskedAndWaiting checks what a pod reports it
// wanted: every request that asked, and those waiting now.
func TestShareDemandCountsAskedAndWaiting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newShare("1/s", "fleet")
		s.SetRate(1, 1)
		ctx, cancel := context.WithCancel(context.Background())
		for range 3 {
			_ = s.Wait(ctx, 0) // one taken, two refused
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { _ = s.Wait(ctx, 10*time.Second) })
		}
		synctest.Wait()
		asked, waiting := s.Demand()
		if asked != 7 || waiting != 4 {
			t.Errorf("Demand = %d asked, %d waiting; want 7, 4", asked, waiting)
		}
		if asked, _ := s.Demand(); asked != 0 {
			t.Errorf("Demand again = %d asked, want 0 (counted since the last)", asked)
		}
		cancel()
		wg.Wait()
	})
}

// TestSharePauseBindsAWaitingRequest: a request that reserved its token
// before a pause began does not go during the pause.
func TestSharePauseBindsAWaitingRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newShare("10/s", "fleet")
		s.SetRate(10, 1)
		ctx := context.Background()
		_ = s.Wait(ctx, 0) // the bucket starts full: empty it
		var at atomic.Int64
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			err := s.Wait(ctx, 5*time.Second) // reserves the token in 100ms
			at.Store(int64(time.Since(start)))
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		s.Pause(start.Add(time.Second))
		if err := <-done; err != nil || time.Duration(at.Load()) != time.Second {
			t.Errorf("%v at %v, want the request to go when the pause ends (1s)", err, time.Duration(at.Load()))
		}
		if st := s.Status(); st.Share != 10 || st.Burst != 1 || st.Scope != "fleet" || st.Limit != "10/s" {
			t.Errorf("Status = %+v", st)
		}
	})
}

// TestShareTokenAtHandAllocatesNothing checks the cost of the common case.
func TestShareTokenAtHandAllocatesNothing(t *testing.T) {
	s := newShare("1000000/s", "fleet")
	s.SetRate(1_000_000, 100_000)
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = s.Wait(ctx, 0) }); n != 0 {
		t.Errorf("%v allocations per token at hand", n)
	}
}

// TestShareWaitersTakeTurns: requests that wait are served first come,
// first served, one token each as it comes; one that arrives behind more
// requests than the rate can serve within its wait is refused at once.
func TestShareWaitersTakeTurns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newShare("10/s", "fleet")
		s.SetRate(10, 1)
		if err := s.Wait(context.Background(), 0); err != nil { // the bucket starts full
			t.Fatal(err)
		}
		start := time.Now()
		var mu sync.Mutex
		var order []int
		var at []time.Duration
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				if err := s.Wait(context.Background(), 5*time.Second); err != nil {
					t.Errorf("waiter %d: %v", i, err)
				}
				mu.Lock()
				order, at = append(order, i), append(at, time.Since(start))
				mu.Unlock()
			})
			synctest.Wait() // waiting, in line
		}
		if err := s.Wait(context.Background(), 300*time.Millisecond); !errors.Is(err, registry.ErrRateLimited) || time.Since(start) != 0 {
			t.Errorf("behind 5 at 10/s with 300ms to wait: %v after %v, want registry.ErrRateLimited at once", err, time.Since(start))
		}
		wg.Wait()
		for i := range 5 {
			if order[i] != i || at[i] != time.Duration(i+1)*100*time.Millisecond {
				t.Fatalf("served %v at %v, want 0..4 at 100ms, 200ms, ...", order, at)
			}
		}
	})
}

// BenchmarkShareTokenAtHand is the cost of a token at hand on a share,
// beside the core's BenchmarkTokenAtHand at scope local (one pod's own
// bucket either way).
func BenchmarkShareTokenAtHand(b *testing.B) {
	ctx := context.Background()
	s := newShare("1000000000/s", "fleet")
	s.SetRate(1e9, 100000)
	s.SetEnd(time.Now().Add(time.Hour)) // a grant from Redis, as in sync
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Wait(ctx, 0)
	}
}

// BenchmarkShareTokenAtHandParallel is BenchmarkShareTokenAtHand from
// every processor at once: the count of what was asked, contended.
func BenchmarkShareTokenAtHandParallel(b *testing.B) {
	ctx := context.Background()
	s := newShare("1000000000/s", "fleet")
	s.SetRate(1e9, 100000)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = s.Wait(ctx, 0)
		}
	})
}
