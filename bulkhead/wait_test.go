package bulkhead

// Timing tests: every one runs in a testing/synctest bubble, so waits are
// measured on the bubble's fake clock and are exact.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestAcquireWait covers every timing behaviour of a full bulkhead under a
// fake clock: one caller holds capacity permits and another calls Acquire.
func TestAcquireWait(t *testing.T) {
	errCause := errors.New("caller gave up")
	tests := []struct {
		name         string
		maxWait      time.Duration
		ctxTimeout   time.Duration // 0: no deadline on the caller's ctx
		cancelAfter  time.Duration // 0: the caller never cancels
		cancelCause  error         // cause passed to the caller's cancel
		releaseAfter time.Duration // 0: the holder keeps its permits
		wantErr      bool
		wantPlain    bool // the error must be ErrFull itself
		notRefused   bool // a failure that is not a refusal (the caller cancelled)
		wantIs       []error
		wantNotIs    []error
		wantElapsed  time.Duration
	}{
		{name: "no wait rejects at once", maxWait: 0,
			wantErr: true, wantPlain: true, wantIs: []error{ErrFull},
			wantNotIs: []error{context.Canceled, context.DeadlineExceeded}, wantElapsed: 0},
		{name: "max wait passes", maxWait: 100 * time.Millisecond,
			wantErr: true, wantPlain: true, wantIs: []error{ErrFull},
			wantNotIs: []error{context.Canceled, context.DeadlineExceeded}, wantElapsed: 100 * time.Millisecond},
		{name: "permit freed during wait", maxWait: 100 * time.Millisecond, releaseAfter: 30 * time.Millisecond,
			wantElapsed: 30 * time.Millisecond},
		// The caller's cancellation is not a full bulkhead, and is not
		// counted as a refusal.
		{name: "ctx cancelled during wait", maxWait: time.Second, cancelAfter: 20 * time.Millisecond,
			wantErr: true, notRefused: true, wantIs: []error{context.Canceled},
			wantNotIs: []error{ErrFull, context.DeadlineExceeded}, wantElapsed: 20 * time.Millisecond},
		{name: "ctx cancelled with cause", maxWait: time.Second, cancelAfter: 20 * time.Millisecond, cancelCause: errCause,
			wantErr: true, notRefused: true, wantIs: []error{context.Canceled, errCause},
			wantNotIs: []error{ErrFull, context.DeadlineExceeded}, wantElapsed: 20 * time.Millisecond},
		{name: "ctx deadline before max wait", maxWait: time.Second, ctxTimeout: 40 * time.Millisecond,
			wantErr: true, wantIs: []error{ErrFull, context.DeadlineExceeded},
			wantNotIs: []error{context.Canceled}, wantElapsed: 40 * time.Millisecond},
		{name: "ctx deadline after max wait", maxWait: 50 * time.Millisecond, ctxTimeout: time.Second,
			wantErr: true, wantPlain: true, wantIs: []error{ErrFull},
			wantNotIs: []error{context.Canceled, context.DeadlineExceeded}, wantElapsed: 50 * time.Millisecond},
		{name: "permit freed before ctx deadline", maxWait: time.Second, ctxTimeout: 40 * time.Millisecond,
			releaseAfter: 10 * time.Millisecond, wantElapsed: 10 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const capacity = 2
				b := mustNew(t, capacity, tc.maxWait)
				fill(t, b)

				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				if tc.ctxTimeout > 0 {
					var cancelTimeout context.CancelFunc
					ctx, cancelTimeout = context.WithTimeout(ctx, tc.ctxTimeout)
					defer cancelTimeout()
				}
				if tc.cancelAfter > 0 {
					defer time.AfterFunc(tc.cancelAfter, func() { cancel(tc.cancelCause) }).Stop()
				}
				var released atomic.Int64
				if tc.releaseAfter > 0 {
					defer time.AfterFunc(tc.releaseAfter, func() {
						if err := b.Release(); err != nil {
							t.Errorf("holder Release() = %v, want nil", err)
						}
						released.Add(1)
					}).Stop()
				}

				start := time.Now()
				err := b.Acquire(ctx)
				elapsed := time.Since(start)
				synctest.Wait()

				if gotErr := err != nil; gotErr != tc.wantErr {
					t.Fatalf("Acquire() = %v, want error: %v", err, tc.wantErr)
				}
				if tc.wantPlain && err != ErrFull {
					t.Errorf("Acquire() = %#v, want ErrFull itself", err)
				}
				for _, target := range tc.wantIs {
					if !errors.Is(err, target) {
						t.Errorf("errors.Is(%v, %v) = false, want true", err, target)
					}
				}
				for _, target := range tc.wantNotIs {
					if errors.Is(err, target) {
						t.Errorf("errors.Is(%v, %v) = true, want false", err, target)
					}
				}
				if elapsed != tc.wantElapsed {
					t.Errorf("Acquire took %v, want %v", elapsed, tc.wantElapsed)
				}
				wantRefused, wantInFlight := uint64(0), capacity-released.Load()
				if tc.wantErr && !tc.notRefused {
					wantRefused = 1
				} else if !tc.wantErr {
					wantInFlight++
				}
				if got := b.Refused(); got != wantRefused {
					t.Errorf("Refused() = %d, want %d", got, wantRefused)
				}
				if got := b.InFlight(); got != wantInFlight {
					t.Fatalf("InFlight() = %d, want %d", got, wantInFlight)
				}
				for range wantInFlight {
					if err := b.Release(); err != nil {
						t.Fatalf("Release() = %v, want nil", err)
					}
				}
				assertEmptyAndWhole(t, b)
			})
		})
	}
}

// TestAcquireNoLeakWhenReleaseMeetsTimeout frees a permit at the very instant
// the waiter gives up, many times over and with the two timers armed in both
// orders, so that the permit is sometimes handed over just as the wait ends.
// Whatever Acquire returns, the bulkhead must account for exactly the
// permits it handed out.
func TestAcquireNoLeakWhenReleaseMeetsTimeout(t *testing.T) {
	const wait, rounds = 10 * time.Millisecond, 1000
	tests := []struct {
		name         string
		maxWait      time.Duration
		ctxTimeout   time.Duration // 0: no deadline on the caller's ctx
		cancelAfter  time.Duration // 0: the caller never cancels
		releaseFirst bool          // arm the release timer before the caller's
		cancelOnFree bool          // the releasing goroutine also cancels ctx
	}{
		{name: "max wait ends with release", maxWait: wait},
		{name: "ctx deadline ends with release", maxWait: time.Hour, ctxTimeout: wait},
		{name: "release then ctx deadline", maxWait: time.Hour, ctxTimeout: wait, releaseFirst: true},
		{name: "ctx cancel ends with release", maxWait: time.Hour, cancelAfter: wait},
		{name: "release then ctx cancel", maxWait: time.Hour, cancelAfter: wait, releaseFirst: true},
		{name: "ctx cancelled right after release", maxWait: time.Hour, cancelOnFree: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := mustNew(t, 1, tc.maxWait)
				var outcomes [2]int // failed, succeeded
				for range rounds {
					fill(t, b)
					ctx, cancel := context.WithCancel(context.Background())
					free := func() {
						_ = b.Release()
						if tc.cancelOnFree {
							cancel()
						}
					}
					var release *time.Timer
					if tc.releaseFirst {
						release = time.AfterFunc(wait, free)
					}
					if tc.ctxTimeout > 0 {
						ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
					}
					var cancelTimer *time.Timer
					if tc.cancelAfter > 0 {
						cancelTimer = time.AfterFunc(tc.cancelAfter, cancel)
					}
					if !tc.releaseFirst {
						release = time.AfterFunc(wait, free)
					}
					start := time.Now()
					err := b.Acquire(ctx)
					if got := time.Since(start); got != wait {
						t.Fatalf("Acquire() = %v after %v, want a result after %v", err, got, wait)
					}
					synctest.Wait() // let both timers' functions finish
					if release.Stop() || cancelTimer != nil && cancelTimer.Stop() {
						t.Fatal("a timer due at the end of the wait had not fired")
					}
					cancel()

					wantInFlight := int64(0)
					if err == nil {
						wantInFlight = 1
						outcomes[1]++
					} else if !errors.Is(err, ErrFull) && !errors.Is(err, context.Canceled) {
						t.Fatalf("Acquire() = %v, want nil, ErrFull or context.Canceled", err)
					} else {
						outcomes[0]++
					}
					if got := b.InFlight(); got != wantInFlight {
						t.Fatalf("after Acquire() = %v: InFlight() = %d, want %d", err, got, wantInFlight)
					}
					if err == nil {
						if err := b.Release(); err != nil {
							t.Fatalf("Release() = %v, want nil", err)
						}
					}
					assertEmptyAndWhole(t, b)
				}
				t.Logf("%d rounds: %d failed, %d succeeded", rounds, outcomes[0], outcomes[1])
			})
		})
	}
}

// TestConcurrentWaitersQueue has 50 callers each hold a permit for 10ms on a
// bulkhead of 5 with a long wait: all succeed, never more than 5 at once,
// and the queue drains in 10 rounds.
func TestConcurrentWaitersQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const capacity, callers, hold = 5, 50, 10 * time.Millisecond
		b := mustNew(t, capacity, time.Second)
		var held, maxHeld atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range callers {
			wg.Go(func() {
				if err := b.Acquire(context.Background()); err != nil {
					t.Errorf("Acquire() = %v, want nil", err)
					return
				}
				n := held.Add(1)
				for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
				}
				time.Sleep(hold)
				held.Add(-1)
				if err := b.Release(); err != nil {
					t.Errorf("Release() = %v, want nil", err)
				}
			})
		}
		wg.Wait()
		if got := maxHeld.Load(); got != capacity {
			t.Errorf("max permits held at once = %d, want %d", got, capacity)
		}
		if got, want := time.Since(start), callers/capacity*hold; got != want {
			t.Errorf("all callers done after %v, want %v", got, want)
		}
		if got := b.Refused(); got != 0 {
			t.Errorf("Refused() = %d, want 0", got)
		}
		assertEmptyAndWhole(t, b)
	})
}
