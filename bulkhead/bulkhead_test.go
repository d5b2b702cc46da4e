package bulkhead

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustNew(t testing.TB, capacity int64, maxWait time.Duration) *Bulkhead {
	t.Helper()
	b, err := New(capacity, maxWait)
	if err != nil {
		t.Fatalf("New(%d, %v) error = %v, want nil", capacity, maxWait, err)
	}
	return b
}

// fill takes every permit of b with TryAcquire.
func fill(t *testing.T, b *Bulkhead) {
	t.Helper()
	for i := range b.Capacity() {
		if !b.TryAcquire() {
			t.Fatalf("TryAcquire #%d on a bulkhead with capacity %d = false, want true", i+1, b.Capacity())
		}
	}
}

// assertEmptyAndWhole checks that no permit is held and that exactly
// Capacity permits can be taken (the attempt beyond that counts as one
// rejection), then gives them all back.
func assertEmptyAndWhole(t *testing.T, b *Bulkhead) {
	t.Helper()
	if got := b.InFlight(); got != 0 {
		t.Fatalf("InFlight() = %d, want 0", got)
	}
	refused := b.Refused()
	fill(t, b)
	if b.TryAcquire() {
		t.Fatalf("TryAcquire beyond capacity %d = true, want false", b.Capacity())
	}
	for range b.Capacity() {
		if err := b.Release(); err != nil {
			t.Fatalf("Release() = %v, want nil", err)
		}
	}
	if got, want := b.Refused(), refused+1; got != want {
		t.Fatalf("Refused() = %d, want %d", got, want)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		capacity int64
		maxWait  time.Duration
		wantErr  bool
	}{
		{"capacity zero", 0, 0, true},
		{"capacity negative", -3, time.Second, true},
		{"max wait negative", 4, -time.Nanosecond, true},
		{"both bad", -1, -time.Second, true},
		{"capacity one no wait", 1, 0, false},
		{"capacity 64 with wait", 64, 250 * time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(tc.capacity, tc.maxWait)
			if tc.wantErr {
				if err == nil || b != nil {
					t.Fatalf("New(%d, %v) = (%v, %v), want (nil, error)", tc.capacity, tc.maxWait, b, err)
				}
				return
			}
			if err != nil || b == nil {
				t.Fatalf("New(%d, %v) = (%v, %v), want (bulkhead, nil)", tc.capacity, tc.maxWait, b, err)
			}
			if got := b.Capacity(); got != tc.capacity {
				t.Errorf("Capacity() = %d, want %d", got, tc.capacity)
			}
			if got := b.MaxWait(); got != tc.maxWait {
				t.Errorf("MaxWait() = %v, want %v", got, tc.maxWait)
			}
			if got := b.Refused(); got != 0 {
				t.Errorf("Refused() = %d, want 0", got)
			}
			assertEmptyAndWhole(t, b)
		})
	}
}

func TestTryAcquireAndFastPath(t *testing.T) {
	b := mustNew(t, 3, 0)
	ctx := context.Background()
	if err := b.Acquire(ctx); err != nil {
		t.Fatalf("Acquire on empty bulkhead = %v, want nil", err)
	}
	if first, second := b.TryAcquire(), b.TryAcquire(); !first || !second {
		t.Fatal("TryAcquire with free permits = false, want true")
	}
	if got := b.InFlight(); got != 3 {
		t.Fatalf("InFlight() = %d, want 3", got)
	}
	if b.TryAcquire() {
		t.Fatal("TryAcquire on full bulkhead = true, want false")
	}
	if err := b.Acquire(ctx); err != ErrFull {
		t.Fatalf("Acquire on full bulkhead with maxWait 0 = %v, want ErrFull itself", err)
	}
	if got := b.Refused(); got != 2 {
		t.Fatalf("Refused() = %d, want 2", got)
	}
	if err := b.Release(); err != nil {
		t.Fatalf("Release() = %v, want nil", err)
	}
	if !b.TryAcquire() {
		t.Fatal("TryAcquire after a Release = false, want true")
	}
	for range 3 {
		if err := b.Release(); err != nil {
			t.Fatalf("Release() = %v, want nil", err)
		}
	}
	assertEmptyAndWhole(t, b)
}

func TestFastPathsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	free := mustNew(t, 1, time.Millisecond)
	full := mustNew(t, 1, 0)
	fill(t, full)
	tests := []struct {
		name string
		fn   func() bool // reports whether the call behaved as expected
	}{
		{"Acquire+Release free", func() bool { return free.Acquire(ctx) == nil && free.Release() == nil }},
		{"TryAcquire+Release free", func() bool { return free.TryAcquire() && free.Release() == nil }},
		{"Acquire full maxWait 0", func() bool { return full.Acquire(ctx) == ErrFull }},
		{"TryAcquire full", func() bool { return !full.TryAcquire() }},
		{"Release over", func() bool { return free.Release() == ErrOverRelease }},
	}
	for _, tc := range tests {
		bad := 0
		allocs := testing.AllocsPerRun(100, func() {
			if !tc.fn() {
				bad++
			}
		})
		if bad > 0 {
			t.Errorf("%s: %d calls did not behave as expected, want 0", tc.name, bad)
		}
		if allocs != 0 {
			t.Errorf("%s: allocs/op = %v, want 0", tc.name, allocs)
		}
	}
}

// TestConcurrentNoWait starts 50 callers at once on a bulkhead of 5 with no
// wait. Holders keep their permits until every caller has tried, so exactly
// 5 succeed and 45 are rejected.
func TestConcurrentNoWait(t *testing.T) {
	const capacity, callers = 5, 50
	b := mustNew(t, capacity, 0)
	var (
		held, maxHeld, ok, full atomic.Int64
		tried, done             sync.WaitGroup
	)
	start, allTried := make(chan struct{}), make(chan struct{})
	tried.Add(callers)
	for range callers {
		done.Go(func() {
			<-start
			err := b.Acquire(context.Background())
			tried.Done()
			if err != nil {
				if err != ErrFull {
					t.Errorf("Acquire() = %v, want ErrFull", err)
				}
				full.Add(1)
				return
			}
			ok.Add(1)
			n := held.Add(1)
			for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
			}
			<-allTried
			held.Add(-1)
			if err := b.Release(); err != nil {
				t.Errorf("Release() = %v, want nil", err)
			}
		})
	}
	close(start)
	tried.Wait()
	close(allTried)
	done.Wait()

	if got := maxHeld.Load(); got > capacity {
		t.Errorf("max permits held at once = %d, want <= %d", got, capacity)
	}
	if got := ok.Load(); got != capacity {
		t.Errorf("successful Acquires = %d, want %d", got, capacity)
	}
	if got := full.Load(); got != callers-capacity {
		t.Errorf("ErrFull refusals = %d, want %d", got, callers-capacity)
	}
	if got := b.Refused(); got != uint64(full.Load()) {
		t.Errorf("Refused() = %d, want %d (refusals seen)", got, full.Load())
	}
	assertEmptyAndWhole(t, b)
}

func TestReleaseOverRelease(t *testing.T) {
	tests := []struct {
		name     string
		acquired int
		releases int
		wantOver int // how many of the releases must report ErrOverRelease
	}{
		{"release on new bulkhead", 0, 1, 1},
		{"one release too many", 1, 2, 1},
		{"many releases too many", 2, 5, 3},
		{"balanced", 3, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Release panicked: %v", r)
				}
			}()
			b := mustNew(t, 3, 0)
			for range tc.acquired {
				if !b.TryAcquire() {
					t.Fatal("TryAcquire() = false, want true")
				}
			}
			over := 0
			for range tc.releases {
				switch err := b.Release(); {
				case errors.Is(err, ErrOverRelease):
					over++
				case err != nil:
					t.Fatalf("Release() = %v, want nil or ErrOverRelease", err)
				}
			}
			if over != tc.wantOver {
				t.Errorf("Release() returned ErrOverRelease %d times, want %d", over, tc.wantOver)
			}
			assertEmptyAndWhole(t, b)
		})
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	bh := mustNew(b, 1, time.Second)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := bh.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		_ = bh.Release()
	}
}

func BenchmarkAcquireFull(b *testing.B) {
	bh := mustNew(b, 1, 0)
	ctx := context.Background()
	if !bh.TryAcquire() {
		b.Fatal("TryAcquire() = false, want true")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := bh.Acquire(ctx); err != ErrFull {
			b.Fatalf("Acquire() = %v, want ErrFull", err)
		}
	}
}

func BenchmarkParallel(b *testing.B) {
	bh := mustNew(b, 64, time.Second)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := bh.Acquire(ctx); err != nil {
				b.Error(err)
				return
			}
			_ = bh.Release()
		}
	})
}
