package registry

import (
	"context"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// call is one call on its way through the pipeline: what its stages read
// and write, from the entry to the response headers (or the error). It
// lives inside the call's response body, with the permit and the first
// attempt, so that a call costs one allocation for all three.
type call struct {
	c     *Client
	route *route          // the policy the call runs on: its route's, or the system's
	req   *http.Request   // the request of the current hop, under ctx
	ctx   context.Context // the call's capped context (the admit stage's)
	start time.Time       // when the call was admitted; zero unless c.timed
	// own is the call's request (internal/firstRequest): the caller's
	// copied under ctx, its URL joined to BASE_URL. It is the Request of
	// the call's answer unless a redirect was followed, and req on the
	// first hop unless that carries X-Time-Budget.
	own http.Request
	// lent is req on the first hop when it was lent by the client's pool
	// (internal/lentRequest), until something makes it unsafe to give
	// back: a transport error, a redirect; nil otherwise.
	lent *lentRequest
	// budgeted: the attempts of the current hop carry X-Time-Budget (the
	// system receives one, the call has a deadline, the hop goes to the
	// system's origin); fresh: req's was set a moment ago, in a header
	// map of its own, so the first attempt need not copy req again.
	budgeted, fresh bool
	redirected      bool // a redirect was followed: a hop after the first was sent
	// replayable: the current hop's request may be sent more than once
	// (retried, hedged): a safe method or an Idempotency-Key, and a body
	// that can be produced again.
	replayable bool
	attempt    attempt // the attempts of the call, one after the other
}

// attempt is one request sent on behalf of a call: a first attempt, a
// retry, or a copy sent by hedging. A stage fills in its result.
type attempt struct {
	call *call
	req  *http.Request
	n    int           // 1 for the first attempt of its hop
	last bool          // no attempt may follow: a failure gives up
	t0   time.Time     // when it went; zero unless the client is timed
	took time.Duration // until it ended; zero unless the client is timed

	resp  *http.Response
	op    observe.Op    // what ended it without a response; 0 with one
	err   error         // nil with a response
	avail time.Duration // the time it had before its deadline; -1: none
}

// reset makes a ready for attempt n of its call, with req.
func (a *attempt) reset(req *http.Request, n int, last bool) {
	*a = attempt{call: a.call, req: req, n: n, last: last, avail: -1}
}

// The stages. Each is a type built once per client (newClient) that holds
// the next stage, and has one method that takes the call, or one of its
// attempts, and hands it on. A stage whose setting is off is not built.
type (
	// callStage handles one hop of a call: the redirect, adaptive and
	// retry stages.
	callStage interface {
		handle(*call) (*http.Response, error)
	}
	// attemptStage sends one attempt and fills in its result: the hedge,
	// report, breaker, rate, fault and transport stages.
	attemptStage interface {
		send(*attempt)
	}
)

// call runs one call through the pipeline, outer to inner: the fast
// refusals (refuse), the bulkhead and the budget (admit), the request of
// the first hop (prepare), then the system's chain of call stages. The
// response's body carries the permit back.
func (c *Client) call(req *http.Request) (*http.Response, error) {
	p := c.policy(req)
	if err := c.refuse(req, p); err != nil {
		closeBody(req)
		return nil, err
	}
	b, err := c.admit(req, p)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	cl := &b.Call
	if err := c.prepare(req, cl); err != nil {
		b.Permit.Done()
		return nil, err
	}
	resp, err := p.chain.handle(cl)
	if err != nil {
		b.Permit.Done()
		return nil, err
	}
	if !cl.redirected {
		resp.Request = &cl.own // never the attempt's, which may be lent
	}
	if cl.lent != nil {
		b.Loan = cl.lent // back to the pool once the caller closed the body
	}
	return b.Wrap(resp), nil
}

// body is a call's response body (permit.go, body.go): it carries the
// permit back, and holds the call.
type body = permitBody[call]

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
