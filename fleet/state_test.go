package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
)

// TestWindowTripsOnEvidenceNoPodHasAlone: 10 pods each see 3 failures,
// too few for their own breakers (MIN_REQUESTS 20); the fleet's window
// holds 30 and opens every pod.
func TestWindowTripsOnEvidenceNoPodHasAlone(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var pods []*circuit
	for range 10 {
		f, c := newPod(t, srv, "thin", testSettings)
		waitFor(t, syncWait, "sync", f.synced.Load)
		pods = append(pods, c)
	}
	for _, c := range pods {
		for range 3 {
			c.Execute(fail)
		}
		if got, _ := c.local.Breaker(); got != observe.BreakerClosed {
			t.Fatalf("local breaker %v after 3 failures, want closed", got)
		}
	}
	for i, c := range pods {
		waitFor(t, syncWait, "fleet open", func() bool { return stateOf(c) == observe.BreakerOpen })
		if _, err := c.Execute(fail); !errors.Is(err, errOpen) {
			t.Fatalf("pod %d: err %v, want open", i, err)
		}
	}
}

// TestStaleWriterCannotUndoANewerOpen: a writer that missed the
// change to a newer open (it still believes the old version closed, or
// half-open) cannot close it, nor write back an older state.
func TestStaleWriterCannotUndoANewerOpen(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := testSettings
	s.openTimeout = time.Minute
	f, c := newPod(t, srv, "stale", s)
	waitFor(t, syncWait, "sync", f.synced.Load)
	r, err := runOp(c, tripOf(0))
	if err != nil || r[0] != 1 || r[1] != 1 {
		t.Fatalf("trip v0: %v %v, want v1 open", r, err)
	}
	// A writer that still believes v0 (closed) or a stale half-open v0.
	for _, try := range []struct {
		name string
		run  func() ([]int64, error)
	}{
		{"trip v0 again", func() ([]int64, error) {
			return runOp(c, tripOf(0))
		}},
		{"probe success v0", func() ([]int64, error) {
			return runOp(c, probeOf(0, true, 1))
		}},
		{"probe success v1 while still open", func() ([]int64, error) {
			return runOp(c, probeOf(1, true, 1))
		}},
		{"restore closed v1", func() ([]int64, error) {
			return runOp(c, restoreOf(1, false, 0))
		}},
	} {
		r, err := try.run()
		if err != nil || r[0] != 1 || r[1] != 1 || r[2] < 50000 {
			t.Errorf("%s: got %v %v, want v1 open still (~60s left)", try.name, r, err)
		}
	}
	waitFor(t, syncWait, "pod applies v1", func() bool { return c.view.Load().ver == 1 })
	if c.apply(state{}, time.Now()); c.view.Load().ver != 1 || !c.view.Load().open {
		t.Errorf("a stale v0 closed message moved the view to %+v", c.view.Load())
	}
}
