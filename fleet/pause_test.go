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
// 429 with Retry-After: 2. No pod sends the upstream anything from 200ms
// after that answer until 2s after it (within 200ms either side), then
// they all resume; a pod that starts during the pause learns of it from
// Redis.
func TestUpstreamPauseStopsEveryPod(t *testing.T) {
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
	pods := startPods(t, 5, srv, "pause", "local", up.URL, env)
	settle(t, pods, 200)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var served atomic.Int64
	for _, p := range pods {
		drive(ctx, &wg, p, 8, 0, &served)
	}
	time.Sleep(time.Second)
	trigger.Store(true)
	waitFor(t, 2*time.Second, "the 429", func() bool { return answered.Load() != 0 })
	t0 := time.Unix(0, answered.Load())
	time.Sleep(time.Second)
	for i, p := range pods {
		if d := p.c.Status().Rate.PausedUntil.Sub(t0); d < 1800*time.Millisecond || d > 2200*time.Millisecond {
			t.Errorf("pod %d's Status: paused until %v after the 429, want 2s within 200ms", i, d)
		}
	}
	late := startPods(t, 1, srv, "pause", "local", up.URL, env)[0]
	lateUntil := late.c.Status().Rate.PausedUntil
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()

	var last, first time.Time // the last arrival of the pause's start, the first after it
	for _, at := range up.since(t0.Add(time.Nanosecond)) {
		if at.Sub(t0) < time.Second {
			last = at
		} else if first.IsZero() {
			first = at
		}
	}
	stop, resume := time.Duration(0), first.Sub(t0) // stop 0: nothing reached it after the 429
	if !last.IsZero() {
		stop = last.Sub(t0)
	}
	t.Logf("429 with Retry-After: 2 on one pod: the last request reached the upstream %v after it, the next %v after it; a pod started 1s into the pause was paused until %v after it",
		stop.Round(time.Millisecond), resume.Round(time.Millisecond), lateUntil.Sub(t0).Round(time.Millisecond))
	if stop > 200*time.Millisecond {
		t.Errorf("requests reached the upstream until %v after the 429, want none after 200ms", stop)
	}
	if resume < 1800*time.Millisecond || resume > 2200*time.Millisecond {
		t.Errorf("the first request after the pause came %v after the 429, want 2s within 200ms", resume)
	}
	if d := lateUntil.Sub(t0); d < 1800*time.Millisecond || d > 2200*time.Millisecond {
		t.Errorf("a pod started during the pause is paused until %v after the 429, want 2s within 200ms", d)
	}
	if n := len(windowOf(up.since(t0), t0.Add(2200*time.Millisecond), 500*time.Millisecond)); n < 50 {
		t.Errorf("%d requests in the half second from 2.2s after the 429, want the pods to resume (about 100)", n)
	}
}

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
	waitFor(t, 2*time.Second, "every pod's observer told", func() bool {
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
