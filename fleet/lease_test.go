package fleet

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// TestHalfOpenProbesLeasedFleetWide: 5 pods, HALF_OPEN_PROBES=2: no round
// (one open version) sends more than 2 probes across the fleet, and the
// round that closes sends exactly 2.
func TestHalfOpenProbesLeasedFleetWide(t *testing.T) {
	srv := redistest.Start(t)
	s := testSettings
	s.openTimeout = 300 * time.Millisecond
	var pods []*circuit
	for range 5 {
		f, c := newPod(t, srv, "probes", s)
		waitFor(t, 2*time.Second, "sync", f.synced.Load)
		pods = append(pods, c)
	}
	r, err := runScript(pods[0], tripScript, 0)
	if err != nil || r[0] != 1 {
		t.Fatalf("trip: %v %v", r, err)
	}
	var mu sync.Mutex
	probes := map[int64]int{} // open version -> probes sent
	healthy := atomic.Bool{}
	send := func(c *circuit) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			mu.Lock()
			probes[c.view.Load().ver]++
			mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			if healthy.Load() {
				return &http.Response{StatusCode: 200}, nil
			}
			return nil, errUpstream
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range pods {
		wg.Go(func() {
			for ctx.Err() == nil {
				c.Execute(send(c))
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	healthy.Store(true)
	waitFor(t, 3*time.Second, "fleet closed", func() bool {
		for _, c := range pods {
			if v := c.view.Load(); v.open {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	closedAt := pods[0].view.Load().ver // the closed version; its round was ver-1
	rounds := 0
	for ver, n := range probes {
		if ver == 0 || ver >= closedAt {
			continue // closed: ordinary calls (v0: before the pod saw the trip)
		}
		rounds++
		if n > s.probes {
			t.Errorf("open version %d: %d probes fleet-wide, want <= %d", ver, n, s.probes)
		}
	}
	if got := probes[closedAt-1]; got != s.probes {
		t.Errorf("the round that closed sent %d probes, want %d", got, s.probes)
	}
	if rounds < 3 {
		t.Errorf("%d half-open rounds in 1.5s of a dead upstream (open 300ms), want >= 3", rounds)
	}
	t.Logf("probes per open version: %v (closed at v%d)", probes, closedAt)
}
