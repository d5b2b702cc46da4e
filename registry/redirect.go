package registry

import (
	"net/http"

	"github.com/outbound-go/outbound/internal/origin"
	"github.com/outbound-go/outbound/internal/redirect"
	"github.com/outbound-go/outbound/observe"
)

// redirectStage follows a call's redirects under the system's policy
// (FOLLOW_REDIRECTS, MAX_REDIRECTS; internal/redirect), each hop through
// the retry stage, inside the call's one permit and one deadline. It is
// in the chain unless FOLLOW_REDIRECTS is none, and a call whose answer
// is not a redirect pays nothing for it.
type redirectStage struct {
	policy *redirect.Policy
	next   callStage
}

func (s *redirectStage) handle(cl *call) (*http.Response, error) {
	first := cl.req
	resp, err := s.next.handle(cl)
	if err != nil || !s.policy.Redirected(resp) {
		return resp, err
	}
	// The chain of hops keeps every request it saw: the first attempt's
	// is not given back.
	cl.lent = nil
	resp, err = s.policy.Follow(first, resp, func(req *http.Request) (*http.Response, error) {
		cl.hop(req)
		return s.next.handle(cl)
	})
	if err != nil {
		if e, ok := err.(*Error); ok {
			return nil, e
		}
		// The engine's own (a Location that does not parse).
		return nil, cl.fail(observe.OpTransport, 0, err)
	}
	return resp, nil
}

// hop makes req, a redirect of the call, its current request. Its
// attempts carry X-Time-Budget only when it goes to the system's own
// origin: the budget is never sent to another host.
func (cl *call) hop(req *http.Request) {
	_, deadline := cl.ctx.Deadline()
	cl.req = req
	cl.fresh, cl.redirected = false, true
	cl.budgeted = deadline && !cl.route.cfg.OmitTimeBudget && origin.Same(req.URL, cl.c.base)
}
