package bulkhead

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestAdaptiveParks: a lower limit takes the free permits at once and
// the held ones as their callers give them back; a higher limit gives
// them back. The counts never go wrong and Release never panics.
func TestAdaptiveParks(t *testing.T) {
	b, err := NewAdaptive(1, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if !b.TryAcquire() {
			t.Fatal("TryAcquire at the ceiling refused")
		}
	}
	setLimit(b, 1) // one free permit parked now, two owed
	if b.TryAcquire() {
		t.Fatal("TryAcquire beyond the lowered limit admitted")
	}
	if got := b.adaptive.owed.Load(); got != 2 || b.adaptive.parked != 1 {
		t.Fatalf("owed %d, parked %d; want 2, 1", got, b.adaptive.parked)
	}
	for range 2 {
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
		if b.TryAcquire() {
			t.Fatal("a released permit was handed out while owed")
		}
	}
	if err := b.Release(); err != nil { // the last one goes back
		t.Fatal(err)
	}
	if !b.TryAcquire() || b.TryAcquire() {
		t.Fatal("want exactly one permit at limit 1")
	}
	setLimit(b, 4)
	for range 3 {
		if !b.TryAcquire() {
			t.Fatal("a permit was not given back by the raised limit")
		}
	}
	if b.TryAcquire() {
		t.Fatal("admitted beyond the ceiling")
	}
	for range 4 {
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Release(); !errors.Is(err, ErrOverRelease) {
		t.Fatalf("over-release: %v, want ErrOverRelease", err)
	}
}

// TestAdaptiveRecord: Record closes windows on the bulkhead's clock, the
// hook hears the change, and the permits above the new limit are parked
// as their callers give them back.
func TestAdaptiveRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes [][2]int64
		b, err := NewAdaptive(1, 64, 0, OnLimitChange(func(from, to int64) {
			changes = append(changes, [2]int64{from, to})
		}))
		if err != nil {
			t.Fatal(err)
		}
		for range 64 {
			if !b.TryAcquire() {
				t.Fatal("TryAcquire below the ceiling refused")
			}
		}
		window := func(lat time.Duration) {
			for range minSamples + 1 {
				time.Sleep(minWindow / minSamples)
				b.Record(time.Now().Add(-lat), false)
			}
		}
		window(10 * time.Millisecond) // best 10ms, no queue: 64
		window(40 * time.Millisecond) // x4: 64 x 0.5 + 8 = 40
		if b.Limit() != 40 || len(changes) != 1 || changes[0] != [2]int64{64, 40} {
			t.Fatalf("limit %d, changes %v; want 40, [[64 40]]", b.Limit(), changes)
		}
		for range 24 {
			if err := b.Release(); err != nil {
				t.Fatal(err)
			}
		}
		if b.TryAcquire() {
			t.Fatal("admitted with 40 in flight at limit 40")
		}
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
		if !b.TryAcquire() {
			t.Fatal("refused with 39 in flight at limit 40")
		}
		for range 40 {
			_ = b.Release()
		}
	})
}

// setLimit sets the enforced limit as a closed window would.
func setLimit(b *Bulkhead, n int64) {
	b.adaptive.mu.Lock()
	defer b.adaptive.mu.Unlock()
	b.park(b.capacity - n)
}

func TestNewAdaptiveRejects(t *testing.T) {
	for _, c := range []struct{ floor, ceiling int64 }{{0, 4}, {5, 4}, {1, 0}} {
		if _, err := NewAdaptive(c.floor, c.ceiling, 0); err == nil {
			t.Errorf("NewAdaptive(%d, %d): no error", c.floor, c.ceiling)
		}
	}
}

// model is an upstream with a real capacity, in the synctest bubble:
// workers serve one call each for service, the rest queue (FIFO).
type model struct {
	jobs    chan chan struct{}
	service time.Duration
	mu      sync.Mutex
	stops   []chan struct{}
	wg      sync.WaitGroup
}

func newModel(workers int, service time.Duration) *model {
	m := &model{jobs: make(chan chan struct{}, 1<<12), service: service}
	m.resize(workers)
	return m
}

// resize sets the number of workers.
func (m *model) resize(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.stops) > n {
		close(m.stops[len(m.stops)-1])
		m.stops = m.stops[:len(m.stops)-1]
	}
	for len(m.stops) < n {
		stop := make(chan struct{})
		m.stops = append(m.stops, stop)
		m.wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case done := <-m.jobs:
					time.Sleep(m.service)
					close(done)
				}
			}
		})
	}
}

func (m *model) close() { m.resize(0); m.wg.Wait() }

// call sends one call and waits for its answer.
func (m *model) call() {
	done := make(chan struct{})
	m.jobs <- done
	<-done
}

// run drives callers closed-loop through b to m for d: each caller takes
// a permit (or waits 1ms when refused), calls, records the latency, and
// releases. It returns the calls served and the limit every 100ms.
func run(t *testing.T, b *Bulkhead, m *model, callers int, d time.Duration, during func(elapsed time.Duration)) (served int64, limits []int64) {
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if !b.TryAcquire() {
					time.Sleep(time.Millisecond)
					continue
				}
				t0 := time.Now()
				m.call()
				b.Record(t0, false)
				if err := b.Release(); err != nil {
					t.Error(err)
				}
				n.Add(1)
			}
		})
	}
	start := time.Now()
	for ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		limits = append(limits, b.Limit())
		if during != nil {
			during(time.Since(start))
		}
	}
	wg.Wait()
	return n.Load(), limits
}

// TestAdaptiveSettles: 64 callers on an upstream of 8 workers of 10ms.
// The limit falls from the ceiling to near the capacity within a second
// and stays there, and the upstream stays busy (>= 95% of 800 calls/s).
func TestAdaptiveSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewAdaptive(1, 64, 0)
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(8, 10*time.Millisecond)
		defer m.close()
		served, limits := run(t, b, m, 64, 5*time.Second, nil)
		t.Logf("served %d in 5s (capacity 4000); limit every 100ms: %v", served, limits)
		for i, l := range limits[10:] {
			if l < 8 || l > 16 {
				t.Fatalf("limit %d at %v, want 8..16 after the first second", l, time.Duration(i+11)*100*time.Millisecond)
			}
		}
		if served < 3800 {
			t.Fatalf("served %d calls, want >= 95%% of 4000", served)
		}
	})
}

// TestAdaptiveFollows: the capacity goes 8 -> 32 -> 4 workers; the limit
// follows within a second each way.
func TestAdaptiveFollows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewAdaptive(1, 64, 0)
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(8, 10*time.Millisecond)
		defer m.close()
		_, limits := run(t, b, m, 64, 9*time.Second, func(e time.Duration) {
			switch e {
			case 3 * time.Second:
				m.resize(32)
			case 6 * time.Second:
				m.resize(4)
			}
		})
		t.Logf("limit every 100ms (8 workers, 32 from 3s, 4 from 6s): %v", limits)
		within := func(from, to int, lo, hi int64) {
			t.Helper()
			for i := from; i < to; i++ {
				if l := limits[i]; l < lo || l > hi {
					t.Fatalf("limit %d at %v, want %d..%d", l, time.Duration(i+1)*100*time.Millisecond, lo, hi)
				}
			}
		}
		within(10, 30, 8, 16)
		within(40, 60, 32, 60)
		within(70, 90, 4, 9)
	})
}

// BenchmarkAdaptiveAcquireRelease is BenchmarkAcquireRelease through an
// adaptive bulkhead, with the Record and the two clock reads (the call's
// start, Record's end) each call adds.
func BenchmarkAdaptiveAcquireRelease(b *testing.B) {
	bh, err := NewAdaptive(1, 64, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := bh.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		bh.Record(time.Now(), false)
		_ = bh.Release()
	}
}
