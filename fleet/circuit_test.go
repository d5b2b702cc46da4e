package fleet

import (
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// bare is a circuit on a fleet with no Redis and no goroutine: the hot
// path alone, the fleet's view set by the test.
func bare(s settings) *circuit {
	f := &Fleet{wakeCh: make(chan struct{}, 1), circuits: map[string]*circuit{}}
	f.synced.Store(true)
	return newCircuit(f, s, testLocal(s), testReports)
}

// TestCircuitOpenThenHalfOpen: the view's open time runs on this pod's
// clock; after it, only a leased probe goes, once per lease, and an
// excluded outcome gives the lease back.
func TestCircuitOpenThenHalfOpen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := bare(testSettings)
		sent := 0
		send := func() (*http.Response, error) { sent++; return nil, errUpstream }
		c.apply(state{ver: 3, open: true, left: time.Second}, time.Now())
		if st := stateOf(c); st != observe.BreakerOpen {
			t.Fatalf("State = %v, want open", st)
		}
		if _, err := c.Execute(send); !errors.Is(err, errOpen) || sent != 0 {
			t.Fatalf("open: err %v, sent %d; want ErrOpenState, nothing sent", err, sent)
		}
		time.Sleep(time.Second)
		if st := stateOf(c); st != observe.BreakerHalfOpen {
			t.Fatalf("after the open time: %v, want half-open", st)
		}
		if _, err := c.Execute(send); !errors.Is(err, errProbesTaken) || !c.want.Load() || sent != 0 {
			t.Fatalf("half-open without a lease: err %v, want %v, sent %d", err, c.want.Load(), sent)
		}
		c.applyLease(state{ver: 3, open: true}, []int64{1}, &roundTrip{sent: time.Now()}, time.Now())
		c.Execute(func() (*http.Response, error) { sent++; return nil, errExcludedForTest })
		if _, err := c.Execute(send); err != errUpstream || sent != 2 {
			t.Fatalf("with a lease (given back once): err %v, sent %d; want the upstream's error, 2 sent", err, sent)
		}
		if _, err := c.Execute(send); !errors.Is(err, errProbesTaken) || sent != 2 {
			t.Fatalf("lease spent: err %v, sent %d", err, sent)
		}
		if len(c.results) != 1 || c.results[0] != (probeResult{ver: 3, ok: false}) {
			t.Errorf("probe results %v, want one failure of v3", c.results)
		}
		c.apply(state{ver: 2}, time.Now()) // stale: ignored
		c.apply(state{ver: 4, open: true, left: time.Second}, time.Now())
		if _, err := c.Execute(send); !errors.Is(err, errOpen) {
			t.Errorf("a newer open: %v", err)
		}
	})
}

var errExcludedForTest = errors.New("excluded")

// TestCircuitDegradedIsLocal: out of sync, the local breaker decides and
// nothing is counted for the fleet.
func TestCircuitDegradedIsLocal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := bare(testSettings)
		c.apply(state{ver: 1, open: true, left: time.Hour}, time.Now())
		c.f.synced.Store(false)
		if _, err := c.Execute(func() (*http.Response, error) { return &http.Response{}, nil }); err != nil {
			t.Fatalf("degraded: %v, want the local breaker's pass", err)
		}
		if c.reqs.Load() != 0 {
			t.Errorf("counted %d for the fleet while degraded", c.reqs.Load())
		}
	})
}

// TestOverrideLearnedLateKeepsItsEnd: an override this pod knows, learned
// again late (the message of its own write delivered 300ms after it, a
// sync reply that read the time left 200ms after it sent the read), keeps
// the sooner end: no delay in hearing of an override holds it past the
// end Redis gives it.
func TestOverrideLearnedLateKeepsItsEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := bare(testSettings)
		start := time.Now()
		c.setForced(observe.BreakerClosed, 1000, start) // as Force does, before its write
		time.Sleep(300 * time.Millisecond)
		c.f.circuits[c.name] = c
		c.f.onForce(message{kind: forceMessage, system: c.name, force: observe.BreakerClosed, ms: 1000})
		if _, until := c.Forced(); !until.Equal(start.Add(time.Second)) {
			t.Errorf("after the write's own message, 300ms late: forced until %v after the write, want 1s", until.Sub(start))
		}
		sent := time.Now()
		time.Sleep(200 * time.Millisecond) // Redis read 600ms left at sent + 100ms
		c.readForced(2, 600, sent, time.Now())
		if _, until := c.Forced(); !until.Equal(sent.Add(600 * time.Millisecond)) {
			t.Errorf("after a read of 600ms left sent at %v: forced until %v, want the read's send + 600ms (%v)",
				sent.Sub(start), until.Sub(start), sent.Add(600*time.Millisecond).Sub(start))
		}
	})
}
