package registry

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// fakeCircuit stands in for a fleet-shared breaker state: it refuses
// every attempt while open is set, and counts what it is told.
type fakeCircuit struct {
	open               atomic.Bool
	executed, refusals atomic.Int32
}

func (f *fakeCircuit) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	if f.open.Load() {
		f.refusals.Add(1)
		return nil, gobreaker.ErrOpenState
	}
	f.executed.Add(1)
	return send()
}

func (f *fakeCircuit) State() gobreaker.State {
	if f.open.Load() {
		return gobreaker.StateOpen
	}
	return gobreaker.StateClosed
}

func (f *fakeCircuit) Counts() gobreaker.Counts { return gobreaker.Counts{} }

// Issue 11: the breaker stage is a seam. Another circuit (a fleet-shared
// state) plugs in without touching the other stages: its verdicts reach
// the caller as the local breaker's would, with no I/O when it refuses,
// and a refusal mid-call (between retries) stops the retries.
func TestIssue11BreakerSeam(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable}, outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	f := &fakeCircuit{}
	c.cb = f
	c.chain = c.buildChain(&options{}) // the stages hold the circuit

	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatal(err)
	}
	if tbrRead(t, resp) != "ok" || f.executed.Load() != 2 {
		t.Fatalf("503 then 200 through the fake circuit: %d attempts executed, want 2", f.executed.Load())
	}

	f.open.Store(true)
	hits := srv.Hits()
	_, _, err = tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	e := tbrError(t, err, observe.OpBreaker)
	if !errors.Is(err, ErrCircuitOpen) || srv.Hits() != hits {
		t.Errorf("%v: want ErrCircuitOpen and no request sent", e)
	}
	if st := c.Status(); st.Breaker != observe.BreakerOpen {
		t.Errorf("Status().Breaker = %s, want open (from the fake circuit)", st.Breaker)
	}
}
