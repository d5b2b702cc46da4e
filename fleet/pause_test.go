package fleet_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
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
