package bulkhead

import (
	"testing"
	"time"
)

// feed closes one window of the limiter: n calls of latency lat evenly
// spread from *now over the shortest window (minWindow, or windowBests
// best latencies), the first fail of them failed, with inFlight in
// flight.
func feed(l *limiter, now *time.Time, n int, lat time.Duration, inFlight int64, fail int) {
	span := max(minWindow, windowBests*l.best)
	step := (span + time.Duration(n-2)) / time.Duration(n-1) // rounded up
	for i := range n {
		if i > 0 {
			*now = now.Add(step)
		}
		ended := l.observe(*now, lat, inFlight, i < fail)
		if ended != (i == n-1) {
			panic("window ended early or late")
		}
	}
	*now = now.Add(step)
}

// feedProbe is feed for a probe window: its calls were admitted once the
// probe began, so the first ends lat after it.
func feedProbe(l *limiter, now *time.Time, n int, lat time.Duration, inFlight int64) {
	*now = now.Add(lat)
	feed(l, now, n, lat, inFlight, 0)
}

// TestLimiterGradient follows the limit window by window, exactly: it
// holds at the ceiling while latency is the best, shrinks by the gradient
// (1.25 x best / median, at most by half) plus √limit of headroom, grows
// while the median is within the tolerance, comes down only to twice the
// calls in flight while less than half used, shrinks by half the failure
// ratio, and does not grow while the limit is unused.
func TestLimiterGradient(t *testing.T) {
	l := newLimiter(1, 64)
	now := time.Unix(0, 0)
	steps := []struct {
		name     string
		lat      time.Duration
		inFlight int64
		fail     int
		want     int64
	}{
		{"no queue at the ceiling", 10 * time.Millisecond, 64, 0, 64},
		{"latency x4: halve at most, plus sqrt(64)", 40 * time.Millisecond, 64, 0, 40},         // 32 + 8
		{"latency x2: x1.25/2, plus sqrt(40)", 20 * time.Millisecond, 40, 0, 31},               // 25 + 6.32
		{"latency x1.25: within tolerance, grow by sqrt", 12500 * time.Microsecond, 31, 0, 36}, // 31.32 + 5.60
		{"20% failed: x0.9, no headroom", 10 * time.Millisecond, 36, 2, 33},                    // 36.92 x 0.9
		{"unused (5 in flight): hold", 10 * time.Millisecond, 5, 0, 33},                        // 33.23
		{"unused and slow: down to 2 x 12 in flight", 40 * time.Millisecond, 12, 0, 24},        // max(16.61, 24)
		{"used again: grow by sqrt", 10 * time.Millisecond, 23, 0, 28},                         // 24 + 4.90
		{"all failed: halve", 10 * time.Millisecond, 28, 10, 14},                               // 28.90 x 0.5
		{"all failed again: halve", 200 * time.Millisecond, 14, 10, 7},                         // 14.45 x 0.5
	}
	for _, s := range steps {
		feed(&l, &now, 10, s.lat, s.inFlight, s.fail)
		if got := l.current(); got != s.want {
			t.Fatalf("%s: limit %d, want %d (%.2f)", s.name, got, s.want, l.limit)
		}
		if l.best != 10*time.Millisecond {
			t.Fatalf("%s: best %v, want 10ms", s.name, l.best)
		}
	}
	for range 10 {
		feed(&l, &now, 10, time.Second, 1, 10)
	}
	if got := l.current(); got != 1 {
		t.Fatalf("after failures only: limit %d, want the floor 1", got)
	}
}

// TestLimiterProbe: a best not seen again for probeAfter starts a probe
// window at half the limit, whose lowest latency becomes the best, up
// (the upstream got slower) as well as down; a probe that moved the best
// is checked by another probeSoon later; the limit does not move during
// a probe.
func TestLimiterProbe(t *testing.T) {
	l := newLimiter(2, 40)
	now := time.Unix(0, 0)
	feed(&l, &now, 10, 10*time.Millisecond, 40, 0) // best 10ms, no queue: next probe in 10s
	fresh := now
	// The upstream is now 20ms: every window shrinks the limit.
	for l.enforced() == l.current() {
		feed(&l, &now, 10, 20*time.Millisecond, l.current(), 0)
	}
	if got := now.Sub(fresh); got < probeAfter || got > probeAfter+2*minWindow {
		t.Fatalf("probe started %v after the best was last seen, want about %v", got, probeAfter)
	}
	lim := l.current()
	if want := max(2, lim/2); l.enforced() != want {
		t.Fatalf("probe admits %d, want %d (half of %d)", l.enforced(), want, lim)
	}
	feedProbe(&l, &now, 10, 20*time.Millisecond, lim/2)
	if l.probing || l.best != 20*time.Millisecond || l.current() != lim {
		t.Fatalf("after the probe: probing %v, best %v, limit %d; want false, 20ms, %d", l.probing, l.best, l.current(), lim)
	}
	if got := l.probeAt.Sub(now); got > probeSoon {
		t.Fatalf("next probe in %v, want %v after a probe that moved the best", got, probeSoon)
	}
	// With the new best, 20ms is no queue: the limit grows again.
	feed(&l, &now, 10, 20*time.Millisecond, lim, 0)
	if l.current() <= lim {
		t.Fatalf("after the probe: limit %d, want it to grow from %d", l.current(), lim)
	}
	if got := l.probeAt.Sub(now); got < probeAfter-minWindow {
		t.Fatalf("next probe in %v, want about %v once a window saw the best again", got, probeAfter)
	}
	// A faster upstream lowers the best at once, without a probe.
	feed(&l, &now, 10, 5*time.Millisecond, l.current(), 0)
	if l.best != 5*time.Millisecond || l.probing {
		t.Fatalf("faster upstream: best %v, probing %v; want 5ms, false", l.best, l.probing)
	}
}

// TestLimiterProbeMeasuresOnlyCallsAdmittedDuringIt: when the capacity
// falls as a probe starts, the calls that end first were admitted at the
// full limit and queued behind it. They must not become the best: the
// probe waits for calls admitted at half the limit, and a best it moved
// is checked again soon.
func TestLimiterProbeMeasuresOnlyCallsAdmittedDuringIt(t *testing.T) {
	l := newLimiter(1, 64)
	now := time.Unix(0, 0)
	feed(&l, &now, 10, 50*time.Millisecond, 64, 0) // best 50ms, no queue
	for !l.probing {
		feed(&l, &now, 10, 60*time.Millisecond, 64, 0) // within the tolerance
	}
	// Admitted at 64 before the probe, each queued 600ms: a whole
	// window's worth of calls, 25ms apart.
	for range 10 {
		l.observe(now, 600*time.Millisecond, 64, false)
		now = now.Add(25 * time.Millisecond)
	}
	if !l.probing || l.best != 50*time.Millisecond {
		t.Fatalf("after calls admitted before the probe: probing %v, best %v; want the probe still on and best 50ms", l.probing, l.best)
	}
	// Admitted at half the limit, they queue half as long.
	feedProbe(&l, &now, 10, 300*time.Millisecond, 32)
	if l.probing || l.best != 300*time.Millisecond {
		t.Fatalf("after the probe: probing %v, best %v; want false, 300ms", l.probing, l.best)
	}
	// The full limit still queues 600ms: the limit comes down, and the
	// moved best is probed again at once (a window lasts 4 bests, more
	// than probeSoon).
	feed(&l, &now, 10, 600*time.Millisecond, 64, 0)
	if l.current() >= 64 || !l.probing {
		t.Errorf("after a window at twice the best: limit %d, probing %v; want below 64 and a probe", l.current(), l.probing)
	}
}

// TestLimiterProbeSoon: a best first measured under a queue (every call
// of the first window waited) is corrected by probes a second apart while
// each finds a best lower by a tenth or more, then every probeAfter.
func TestLimiterProbeSoon(t *testing.T) {
	l := newLimiter(1, 64)
	now := time.Unix(0, 0)
	// A first window under a queue: latencies 40..85ms, so best is 40ms,
	// not the upstream's 10ms.
	for i := range 10 {
		l.observe(now, time.Duration(40+5*i)*time.Millisecond, 64, false)
		now = now.Add(20 * time.Millisecond)
	}
	if l.best != 40*time.Millisecond || l.probing || l.w.calls != 0 {
		t.Fatalf("first window: best %v, probing %v, %d calls open; want 40ms, false, 0", l.best, l.probing, l.w.calls)
	}
	// The queue stands: each window's median is 1.5 x best.
	var gaps []time.Duration
	last := now // the end of the first window, then of each probe
	for best := 40 * time.Millisecond; len(gaps) < 4; {
		if l.probing {
			gaps = append(gaps, now.Sub(last))
			best = max(10*time.Millisecond, best/2) // half the limit halves the queue
			feedProbe(&l, &now, 10, best, l.enforced())
			last = now
			if l.best != best {
				t.Fatalf("probe %d: best %v, want %v", len(gaps), l.best, best)
			}
			continue
		}
		feed(&l, &now, 10, l.best*3/2, l.current(), 0)
	}
	// 1s after the first window; 1s after each probe that halved the
	// best (40 -> 20 -> 10ms); 10s after the one that found no lower.
	want := []time.Duration{probeSoon, probeSoon, probeSoon, probeAfter}
	for i, gap := range gaps {
		if gap < want[i] || gap > want[i]+250*time.Millisecond {
			t.Errorf("probe %d came %v after the previous, want %v (within a window)", i+1, gap, want[i])
		}
	}
}

// TestLimiterWindow: a window needs minSamples calls and minWindow, and
// at least windowBests best latencies for a slow upstream.
func TestLimiterWindow(t *testing.T) {
	l := newLimiter(1, 10)
	now := time.Unix(0, 0)
	for i := range minSamples {
		if l.observe(now, time.Millisecond, 10, false) {
			t.Fatalf("window closed after %d calls at one instant", i+1)
		}
	}
	now = now.Add(minWindow)
	if !l.observe(now, time.Millisecond, 10, false) {
		t.Fatal("window not closed after minSamples calls and minWindow")
	}
	l.best = time.Second
	for range minSamples {
		l.observe(now, time.Second, 10, false)
	}
	if l.observe(now.Add(3*time.Second), time.Second, 10, false) {
		t.Fatal("window of a 1s upstream closed before 4 bests")
	}
	if !l.observe(now.Add(4*time.Second), time.Second, 10, false) {
		t.Fatal("window of a 1s upstream not closed after 4 bests")
	}
}
