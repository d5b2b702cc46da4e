package registry

import (
	"errors"
	"net/http"

	"github.com/outbound-go/outbound/internal/fault"
	"github.com/outbound-go/outbound/internal/transport"
)

// faultStage injects the system's faults into its attempts, for drills
// (OUTBOUND_FAULTS=on and FAULT_*; internal/fault): it aborts a fraction
// with a made-up status and delays a fraction before sending them, so
// that every outer stage sees them as it would see a real failing or
// slow upstream. It is in the chain only during a drill.
type faultStage struct {
	f    *fault.Injector
	next attemptStage
}

func (s *faultStage) send(a *attempt) {
	out, resp, op, err, done := s.f.Inject(a.req)
	if done {
		// As a RoundTripper would: the attempt's body is closed, sent or
		// not.
		closeBody(a.req)
		a.resp, a.op, a.err = resp, op, err
		return
	}
	delayed := out != a.req
	a.req = out
	s.next.send(a)
	if delayed && a.err != nil {
		a.err = fault.MarkDelayed(a.err)
	}
}

// transportStage sends an attempt on the system's own transport (maybe
// wrapped for tracing), and names the phase of its error (op). A
// response never keeps the headers that mark a refusal: only the
// pipeline may say a call was refused (RefusedHeader). It is the last
// stage of every chain.
type transportStage struct {
	rt http.RoundTripper
}

func (s *transportStage) send(a *attempt) {
	resp, err := s.rt.RoundTrip(a.req)
	if err != nil {
		var te *transport.Error // classified already, for a tracer
		if errors.As(err, &te) {
			a.op, a.err = te.Op, te.Err
			return
		}
		a.op, a.err = transport.Classify(a.req.Context(), err), err
		return
	}
	if _, forged := resp.Header[RefusedHeader]; forged {
		delete(resp.Header, RefusedHeader)
		delete(resp.Header, refusedSystemHeader)
	}
	a.resp = resp
}
