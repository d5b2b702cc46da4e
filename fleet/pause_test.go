package fleet_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// TestUpstreamPauseStopsEveryPod: 5 pods share 200/s; one of them gets a
// 429 with Retry-After: 2. Every pod learns of the pause, which ends 2s
// after that answer (within 200ms) on every pod, and no pod sends the
// upstream anything from the moment it knew until the pause ends; then
// they resume. A pod that starts during the pause learns of it from
// Redis (judged when it is in sync before the pause ends: on a starved
// machine it may start too late).
func TestUpstreamPauseStopsEveryPod(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var trigger atomic.Bool
	var answered atomic.Int64 // when the 429 was answered, Unix ns
	up := newArrivals(t, func(w http.ResponseWriter, r *http.Request) {
		if trigger.CompareAndSwap(true, false) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			answered.Store(time.Now().UnixNano())
		}
	})
	env := quotaEnv("200/s", nil)
	var pods []*pod
	var sends []*sendTimes
	for range 5 {
		s := &sendTimes{}
		pods, sends = append(pods, startPods(t, 1, srv, "pause", "local", up.URL, env, s.option())...), append(sends, s)
	}
	settle(t, pods, 200)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var served atomic.Int64
	for _, p := range pods {
		drive(ctx, &wg, p, 8, 0, &served)
	}
	seen := watchPauses(ctx, &wg, clientsOf(pods))
	time.Sleep(time.Second)
	trigger.Store(true)
	waitFor(t, syncWait, "the 429", func() bool { return answered.Load() != 0 })
	t0 := time.Unix(0, answered.Load())
	time.Sleep(time.Second)
	late := startPods(t, 1, srv, "pause", "local", up.URL, env)[0]
	lateUntil := late.c.Status().Rate.PausedUntil
	lateAt := time.Now()
	sleepUntil(seen.end().Add(500 * time.Millisecond))
	cancel()
	wg.Wait()
	seen.check(t, "payments", sends, t0)
	seen.checkLate(t, "payments", lateUntil, lateAt, t0)
}

// clientsOf is the pods' clients.
func clientsOf(pods []*pod) []*registry.Client {
	var out []*registry.Client
	for _, p := range pods {
		out = append(out, p.c)
	}
	return out
}

// sleepUntil sleeps until at, if it is ahead.
func sleepUntil(at time.Time) { time.Sleep(max(0, time.Until(at))) }

// pausesSeen is, for each of some clients, when a watcher first saw it
// paused and until when.
type pausesSeen struct {
	mu        sync.Mutex
	at, until []time.Time
}

// watchPauses samples the clients' pauses every 2ms until ctx ends.
func watchPauses(ctx context.Context, wg *sync.WaitGroup, cs []*registry.Client) *pausesSeen {
	s := &pausesSeen{at: make([]time.Time, len(cs)), until: make([]time.Time, len(cs))}
	wg.Go(func() {
		for ctx.Err() == nil {
			for i, c := range cs {
				u := c.Status().Rate.PausedUntil
				s.mu.Lock()
				if !u.IsZero() && s.at[i].IsZero() {
					s.at[i], s.until[i] = time.Now(), u
				}
				s.mu.Unlock()
			}
			sleepCtx(ctx, 2*time.Millisecond)
		}
	})
	return s
}

// end is the latest end of a pause seen; zero if none was.
func (s *pausesSeen) end() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var end time.Time
	for _, u := range s.until {
		if u.After(end) {
			end = u
		}
	}
	return end
}

// first is the earliest end of a pause seen, zero if none was: the end
// Redis holds, which a pod that starts during the pause reads. (A pod
// that learns of a pause by a message counts its time left from when the
// message reached it: on a busy machine, later than Redis's end.)
func (s *pausesSeen) first() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for _, u := range s.until {
		if !u.IsZero() && (first.IsZero() || u.Before(first)) {
			first = u
		}
	}
	return first
}

// checkLate checks a pod started during the pause of system, in sync at
// lateAt and paused until lateUntil: when it was in sync 200ms before
// the pause's end in Redis (first), its pause ends there, within 200ms
// (a starved machine may bring it in sync too late to judge).
func (s *pausesSeen) checkLate(t *testing.T, system string, lateUntil, lateAt, t0 time.Time) {
	t.Helper()
	t.Logf("a pod started 1s into the pause of %s was paused until %v after the 429 (started, in sync, %v after it)",
		system, lateUntil.Sub(t0).Round(time.Millisecond), lateAt.Sub(t0).Round(time.Millisecond))
	end := s.first()
	if d := lateUntil.Sub(end); lateAt.Before(end.Add(-200*time.Millisecond)) && (d < -200*time.Millisecond || d > 200*time.Millisecond) {
		t.Errorf("a pod started during the pause is paused until %v after the 429, want the fleet's end in Redis, %v, within 200ms",
			lateUntil.Sub(t0), end.Sub(t0))
	}
}

// check checks a pause asked by a 429 with Retry-After: 2 answered
// at t0, by what each pod did: every pod learned of it (seen); it ends on
// every pod 2s after the answer, within 200ms (no sooner than asked, no
// later than 2.2s after the first pod knew); no pod sent a request of a
// call begun from 100ms after it knew until 10ms before the pause ended
// (a pause read from Redis is in whole milliseconds), nor more than one
// per caller of calls begun before (their tokens taken before it knew);
// and the pods sent again after it.
func (seen *pausesSeen) check(t *testing.T, what string, sends []*sendTimes, t0 time.Time) {
	t.Helper()
	seen.mu.Lock()
	defer seen.mu.Unlock()
	knew := time.Duration(0)
	for i, at := range seen.at {
		if at.IsZero() {
			t.Fatalf("%s: pod %d never learned of the pause", what, i)
		}
		knew = max(knew, at.Sub(t0))
	}
	after, late := 0, 0
	for i, s := range sends {
		until := seen.until[i]
		// A pause ends 2s after the pod learned of it (the 429, or the
		// fleet's pause with its time left): never before the 429's 2s,
		// never past 2s after the watcher saw the pod paused, however late
		// a starved machine ran either.
		if d := until.Sub(t0); d < 1800*time.Millisecond || until.After(seen.at[i].Add(2200*time.Millisecond)) {
			t.Errorf("%s: pod %d paused until %v after the 429 (seen paused %v after it), want 2s from when it learned, within 200ms",
				what, i, d, seen.at[i].Sub(t0))
		}
		// What the pod's quota granted from 100ms after the pod knew: a
		// call that began before may have taken its token before, and a
		// starved scheduler may run its send seconds later; each caller
		// has one call at a time, so there are at most pauseCallers such.
		from := seen.at[i].Add(100 * time.Millisecond)
		during, granted := s.sentIn(from, until.Add(-10*time.Millisecond)) // 10ms: a pause carried in whole ms
		if len(during) > 0 {
			t.Errorf("%s: pod %d sent %d requests of calls begun during the pause, the first %v after the 429 (it knew %v after), want none",
				what, i, len(during), during[0].Sub(t0), seen.at[i].Sub(t0))
		}
		if len(granted) > pauseCallers {
			t.Errorf("%s: pod %d sent %d requests during the pause of calls begun before it knew, want at most one per caller (%d)",
				what, i, len(granted), pauseCallers)
		}
		late += len(granted)
		after += len(s.since(until))
	}
	t.Logf("%s: 429 with Retry-After: 2: every pod knew %v after it, paused until %v after it; %d requests of calls begun before sent during it; %d requests sent after the pause",
		what, knew.Round(time.Millisecond), seen.until[0].Sub(t0).Round(time.Millisecond), late, after)
	if after == 0 {
		t.Errorf("%s: no pod sent a request after the pause, want them to resume", what)
	}
}

// pauseCallers bounds the goroutines that call one pod of a pause test
// (drive's k).
const pauseCallers = 8

// windowOf returns the times of at within [from, from+d).
func windowOf(at []time.Time, from time.Time, d time.Duration) []time.Time {
	var out []time.Time
	for _, t := range at {
		if !t.Before(from) && t.Before(from.Add(d)) {
			out = append(out, t)
		}
	}
	return out
}

// pauseLog is an observer that records the pauses it is told of.
type pauseLog struct {
	mu       sync.Mutex
	statuses []int
}

func (*pauseLog) ObserveAttempt(observe.AttemptEvent)                               {}
func (*pauseLog) ObserveCall(observe.CallEvent)                                     {}
func (*pauseLog) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}

func (l *pauseLog) ObservePause(_ string, _ time.Time, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses = append(l.statuses, status)
}

func (l *pauseLog) told() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.statuses)
}

// TestEveryPodsObserversHearOfAFleetPause: a 429 with Retry-After on one
// pod pauses every pod, and every pod's observers (its log record) are
// told of it once: the pod that got it with its status, the others with
// none (status 0), whatever the message and the periodic reads of the
// pause repeat.
func TestEveryPodsObserversHearOfAFleetPause(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var trigger atomic.Bool
	up := newArrivals(t, func(w http.ResponseWriter, r *http.Request) {
		if trigger.CompareAndSwap(true, false) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	logs := []*pauseLog{{}, {}, {}}
	var pods []*pod
	for _, l := range logs {
		pods = append(pods, startPods(t, 1, srv, "pauselog", "local", up.URL, quotaEnv("200/s", nil), registry.WithObserver(l))...)
	}
	settle(t, pods, 200)
	trigger.Store(true)
	if err := get(context.Background(), pods[0].c); err != nil {
		t.Fatal(err)
	}
	waitFor(t, syncWait, "every pod's observer told", func() bool {
		for _, l := range logs {
			if len(l.told()) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(1500 * time.Millisecond) // messages and reads of the pause, which must not be news
	for i, l := range logs {
		want := []int{0}
		if i == 0 {
			want = []int{http.StatusTooManyRequests}
		}
		if got := l.told(); !slices.Equal(got, want) {
			t.Errorf("pod %d's observer was told of pauses with statuses %v, want %v", i, got, want)
		}
	}
}
