package registry

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/internal/redact"
	"github.com/outbound-go/outbound/observe"
)

// This file says how a call or an attempt ended, the same way each time:
// the errors, the counters of Status and the events of the observers
// all come from here, labelled from package observe's tables.

// counters are a client's totals since the registry was built. Calls are
// counted by how they ended (the call outcomes of package observe), apart
// from those refused before the bulkhead admitted them.
type counters struct {
	calls, capped, retries, hedges, hedgesWon, rateRefused atomic.Uint64
	ended                                                  [observe.NumOutcomes]atomic.Uint64 // admitted calls, by outcome
	refused                                                [observe.NumOutcomes]atomic.Uint64 // calls refused before the bulkhead admitted them
}

// refused ends a call refused before the bulkhead admitted it: its error,
// counted by outcome, told to the observers.
func (c *Client) refused(req *http.Request, p *route, op observe.Op, cause error) *Error {
	out := op.Outcome(false)
	c.stats.refused[out].Add(1)
	err := &Error{System: c.name, Op: op, Err: cause}
	for _, o := range c.observers {
		o.ObserveCall(observe.CallEvent{System: c.name, RouteName: p.name, Method: req.Method, Op: op, Err: err, Outcome: out})
	}
	return err
}

// fail ends the call with an [*Error] of op after n attempts (0: none).
func (cl *call) fail(op observe.Op, n int, err error) error {
	return cl.end(&Error{System: cl.c.name, Op: op, Method: cl.req.Method, URL: redact.Request(cl.req), Attempts: n, Err: err},
		op.Outcome(true))
}

// end ends the call with e, labelled out, and returns e.
func (cl *call) end(e *Error, out observe.Outcome) error {
	cl.c.stats.ended[out].Add(1)
	cl.observe(e.Attempts, 0, e, out)
	return e
}

// answered ends the call with resp, the answer to attempt n, labelled
// out.
func (cl *call) answered(resp *http.Response, n int, out observe.Outcome) {
	cl.c.stats.ended[out].Add(1)
	cl.observe(n, resp.StatusCode, nil, out)
}

func (cl *call) observe(attempts, status int, e *Error, out observe.Outcome) {
	c := cl.c
	if len(c.observers) == 0 {
		return
	}
	ev := observe.CallEvent{System: c.name, RouteName: cl.route.name, Method: cl.req.Method, Attempts: attempts, Status: status,
		Duration: time.Since(cl.start), Outcome: out}
	if e != nil {
		ev.Op, ev.Err = e.Op, e
	}
	for _, o := range c.observers {
		o.ObserveCall(ev)
	}
}

// reportStage tells the observers how each attempt ended. It is in the
// chain when the system has observers and does not hedge (the hedge
// stage tells them of its copies itself, once it knows which won).
type reportStage struct {
	c    *Client
	next attemptStage
}

func (s *reportStage) send(a *attempt) {
	a.t0 = time.Now()
	s.next.send(a)
	a.took = time.Since(a.t0)
	s.c.report(a, hedgeTag{})
}

// hedgeTag says how an attempt took part in a hedged race: k is its copy
// (0 the first, 1.. the hedges); won marks the copy whose answer the
// caller got when there was more than one, lost one cancelled because
// another won.
type hedgeTag struct {
	k    int
	won  bool
	lost bool
}

// report tells the observers how a ended: a failure is a retry unless
// a.last says none can follow.
func (c *Client) report(a *attempt, h hedgeTag) {
	req := a.req
	route := observe.Route(req.Context())
	if p := a.call.route; route == "" && p.name != "" {
		route = p.template() // a declared route is a bounded template
	}
	ev := observe.AttemptEvent{System: c.name, RouteName: a.call.route.name, Method: req.Method, Host: req.URL.Host,
		Path: req.URL.Path, Route: route, Attempt: a.n, Hedge: h.k, Won: h.won, Op: a.op, Err: a.err, Duration: a.took}
	if route != "" {
		ev.Path = route
	}
	if c.faults != nil {
		ev.Injected = isInjected(a.resp, a.err)
	}
	switch {
	case a.resp != nil:
		ev.Status = a.resp.StatusCode
		ev.Outcome = answerOutcome(ev.Status)
		if policy.TemporaryStatus(ev.Status) || policy.RetryStatus(ev.Status, a.resp.Header) {
			ev.Outcome = observe.OpStatus.Outcome(a.last) // a 409 the server said to retry is retried too
		}
	default:
		ev.Outcome = a.op.Outcome(a.last)
	}
	if h.lost {
		ev.Outcome = observe.OutcomeHedgeLost
	}
	for _, o := range c.observers {
		o.ObserveAttempt(ev)
	}
}

// each calls tell with every observer that also has T, an optional
// interface of package observe.
func each[T any](observers []observe.Observer, tell func(T)) {
	for _, o := range observers {
		if t, ok := o.(T); ok {
			tell(t)
		}
	}
}
