package bulkhead

import (
	"math"
	"slices"
	"time"
)

// The tuning of the adaptive limit. They are constants, not settings: the
// operator chooses the floor and the ceiling, the algorithm the rest.
const (
	// A window of samples closes at the first call that ends once it is
	// at least minWindow and windowBests best latencies old, and holds at
	// least minSamples calls: long enough for a change of the limit to
	// show in the latency it measures.
	minWindow   = 100 * time.Millisecond
	windowBests = 4
	minSamples  = 10

	// minGradient is the most one window can shrink the limit (by half),
	// so that one slow window cannot drop it to the floor.
	minGradient = 0.5

	// tolerance is the latency over best that a window's median may show
	// before it counts as queueing: calls vary, and a client's own
	// scheduling delays are not the upstream's queue (Envoy's adaptive
	// concurrency filter buffers its minimum latency by 25% too).
	tolerance = 1.25

	// fresh is how close to the best latency a window's median must come
	// for the best to count as seen again (no queue in that window).
	fresh = 1.1

	// kept is how many of a window's latest successful latencies are kept
	// for its median.
	kept = 64

	// probeSoon is when the first probe comes, and the next one after a
	// probe that found a best lower by a tenth or more: a best measured
	// under a queue (a cold start, a limit far above the capacity) is
	// corrected step by step, each probe halving the queue.
	probeSoon = time.Second

	// probeAfter is how long the best latency may go unseen before a
	// probe window re-measures it at half the limit.
	probeAfter = 10 * time.Second
)

// limiter is the adaptive limit's arithmetic, with no lock, no clock and
// no semaphore: it is fed every call that ends, with the time it ended,
// and says at the end of each window what the limit becomes. Its caller
// serialises the calls to observe.
//
// The rule is a latency gradient. best is the lowest latency seen (the
// upstream with no queue); a window's median latency over best says how
// much of each call was spent queueing. Each window the limit becomes
//
//	limit × clamp(1.25 × best / median, 0.5, 1) + √limit
//
// so it holds where the upstream queues about a quarter of its capacity
// plus √limit calls: it grows by √limit while the median stays within
// 1.25 best and shrinks in proportion once it rises above. A window
// with failures shrinks the limit by half their ratio instead of adding
// the headroom (20% failed: × 0.9). Latency brings a limit that was
// less than half used down to twice the calls in flight, no further: the
// latency of such a window is not the limit's doing.
//
// best can only fall, so it follows an upstream that gets faster at once.
// To follow one that got slower, and to forget a best that a standing
// queue keeps the windows from seeing again, a window after probeAfter
// without a fresh best is a probe: the bulkhead admits half the limit, so
// the upstream's queue drains, and the lowest latency of that window is
// the new best (as BBR's ProbeRTT does). A probe measures only the calls
// admitted after it began: a call admitted before waited in the queue of
// the full limit, and would make that queue the best. The first probe
// comes probeSoon after the first window, and so does the next after a
// probe that moved the best by a tenth or more either way: a best measured
// under a queue (a cold start, or a capacity that fell as the probe
// began, so that even half the limit queues) is corrected in a few
// seconds. The limit itself does not change during a probe.
type limiter struct {
	floor, ceiling float64
	limit          float64 // the estimate, in [floor, ceiling]

	best       time.Duration // lowest latency seen; 0 before the first success
	probeAt    time.Time     // when the next probe starts; zero before the first window
	probing    bool          // the current window is a probe
	probeStart time.Time     // when the current probe began

	w window
}

// window accumulates the calls that ended since it started.
type window struct {
	start       time.Time // zero: no call yet
	calls, fail int
	min         time.Duration       // of the calls that succeeded
	lat         [kept]time.Duration // the latest successes, a ring
	maxInFlight int64
}

// median is the median of the latest successes kept, or 0 if none.
func (w *window) median() time.Duration {
	n := min(w.calls-w.fail, kept)
	if n == 0 {
		return 0
	}
	s := w.lat
	slices.Sort(s[:n])
	return s[n/2]
}

func newLimiter(floor, ceiling int64) limiter {
	return limiter{floor: float64(floor), ceiling: float64(ceiling), limit: float64(ceiling)}
}

// current is the estimated limit, a whole number of calls.
func (l *limiter) current() int64 { return int64(l.limit) }

// enforced is the number of calls the bulkhead admits now: the limit, or
// half of it (not below the floor) while a probe runs.
func (l *limiter) enforced() int64 {
	if l.probing {
		return int64(max(l.floor, math.Floor(l.limit/2)))
	}
	return l.current()
}

// observe records one call that ended at now after latency, with
// inFlight calls in flight (itself included), and whether it failed. At
// the end of a window it recomputes the limit and reports that the limit
// or the probe may have changed (ended true).
func (l *limiter) observe(now time.Time, latency time.Duration, inFlight int64, failed bool) (ended bool) {
	if l.probing && now.Add(-latency).Before(l.probeStart) {
		return false // admitted before the probe: not the probe's to measure
	}
	w := &l.w
	if w.start.IsZero() {
		w.start = now
	}
	w.calls++
	w.maxInFlight = max(w.maxInFlight, inFlight)
	if failed {
		w.fail++
	} else {
		w.lat[(w.calls-w.fail-1)%kept] = latency
		if w.min == 0 || latency < w.min {
			w.min = max(latency, 1)
		}
	}
	if w.calls < minSamples || now.Sub(w.start) < max(minWindow, windowBests*l.best) {
		return false
	}
	l.endWindow(now)
	l.w = window{}
	return true
}

// endWindow applies the window just closed.
func (l *limiter) endWindow(now time.Time) {
	w := &l.w
	ok := w.calls - w.fail
	if l.probing {
		l.probing = false
		l.probeAt = now.Add(probeAfter)
		if ok > 0 {
			if moved := float64(w.min) / float64(l.best); moved < 0.9 || moved > 1.1 {
				l.probeAt = now.Add(probeSoon)
			}
			l.best = w.min
		}
		return
	}
	if ok > 0 && (l.best == 0 || w.min < l.best) {
		l.best = w.min
	}
	used := 2*float64(w.maxInFlight) >= l.limit
	gradient := minGradient
	if ok > 0 {
		median := w.median()
		if float64(median) <= fresh*float64(l.best) {
			l.probeAt = now.Add(probeAfter) // no queue: best is current
		}
		gradient = min(1, max(minGradient, tolerance*float64(l.best)/float64(median)))
	}
	next := l.limit * gradient
	if !used {
		// A limit less than half used is not what slows the calls
		// down: latency brings it down to twice the calls in flight,
		// no further.
		next = max(next, min(l.limit, 2*float64(w.maxInFlight)))
	}
	switch {
	case w.fail > 0:
		next = min(next, l.limit*(1-float64(w.fail)/float64(w.calls)/2))
	case used:
		next += math.Sqrt(l.limit)
	}
	l.limit = min(l.ceiling, max(l.floor, next))
	if l.probeAt.IsZero() {
		l.probeAt = now.Add(probeSoon)
	}
	l.probing = !now.Before(l.probeAt)
	l.probeStart = now
}
