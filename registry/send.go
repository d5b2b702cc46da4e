package registry

import (
	"errors"
	"net/http"

	"github.com/outbound-go/outbound/internal/refusal"
)

// transportStage sends an attempt on the system's own transport (maybe
// wrapped for tracing), and names the phase of its error (op). A
// response never keeps the headers that mark a refusal: only the
// pipeline may say a call was refused or given up on (RefusedHeader,
// GaveUpHeader). It is the last
// stage of every chain.
type transportStage struct {
	rt http.RoundTripper
}

func (s *transportStage) send(a *attempt) {
	resp, err := s.rt.RoundTrip(a.req)
	if err != nil {
		// The transport may still read the request (net/http's
		// RoundTripper contract): the call's lent one is not given back.
		// (Read first: a hedge's copies run at once, and lend nothing.)
		if a.call.lent != nil {
			a.call.lent = nil
		}
		var te *transportError // classified already, for a tracer
		if errors.As(err, &te) {
			a.op, a.err = te.Op, te.Err
			return
		}
		a.op, a.err = classify(a.req.Context(), err), err
		return
	}
	if _, forged := resp.Header[RefusedHeader]; forged {
		delete(resp.Header, RefusedHeader)
		delete(resp.Header, refusedSystemHeader)
	}
	if _, forged := resp.Header[GaveUpHeader]; forged {
		delete(resp.Header, GaveUpHeader)
		delete(resp.Header, refusal.AttemptsHeader)
	}
	a.resp = resp
}
