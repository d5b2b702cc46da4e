package registry

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// This file builds the errors a call ends with and tells the observers:
// the stages say what happened, these functions say it the same way each
// time.

// fail ends a call that sent attempts with an *Error of op and counts it
// as given up (or cancelled).
func (c *Client) fail(req *http.Request, op observe.Op, attempts, status int, err error, start time.Time) error {
	out := observe.OutcomeGaveUp
	if op == observe.OpCanceled {
		out = observe.OutcomeCanceled
	}
	c.stats.gaveUp.Add(1)
	return c.failWith(req, &Error{System: c.name, Op: op, Method: req.Method, URL: redactedURL(req),
		Attempts: attempts, StatusCode: status, Err: err}, attempts, out, start)
}

func (c *Client) failWith(req *http.Request, err error, attempts int, out observe.Outcome, start time.Time) error {
	c.observeCall(req, attempts, 0, err, out, start)
	return err
}

// withCause joins err with the context's cause when the context ended.
func withCause(err error, ctx context.Context) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if errors.Is(err, cause) {
		return err
	}
	if _, ok := streamTimeout(ctx); ok && errors.Is(err, context.Canceled) {
		// A stream's timer cancelled the call, not the caller: the
		// transport's "context canceled" would say otherwise.
		return cause
	}
	return join(err, cause)
}

// redactedURL renders req's URL without userinfo or token-like query
// values.
func redactedURL(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	return config.RedactURL(req.URL.String())
}

func (c *Client) observeCall(req *http.Request, attempts, status int, err error, out observe.Outcome, start time.Time) {
	if len(c.observers) == 0 {
		return
	}
	ev := observe.CallEvent{System: c.name, Method: req.Method, Attempts: attempts, Status: status, Op: opOf(err), Err: err,
		Duration: time.Since(start), Outcome: out}
	for _, o := range c.observers {
		o.ObserveCall(ev)
	}
}

func (c *Client) observeRejected(req *http.Request, out observe.Outcome, err error) {
	for _, o := range c.observers {
		o.ObserveCall(observe.CallEvent{System: c.name, Method: req.Method, Op: opOf(err), Err: err, Outcome: out})
	}
}

// observeAttempt tells the observers how attempt n ended. A failed
// attempt is a retry unless last says none can follow.
func (c *Client) observeAttempt(req *http.Request, n int, last bool, resp *http.Response, op observe.Op, err error, t0 time.Time) {
	c.observeCopy(req, n, last, resp, op, err, t0, hedgeTag{})
}

// observeCopy is observeAttempt for copy h.k of a hedged attempt.
func (c *Client) observeCopy(req *http.Request, n int, last bool, resp *http.Response, op observe.Op, err error, t0 time.Time, h hedgeTag) {
	if len(c.observers) == 0 {
		return
	}
	route, _ := req.Context().Value(routeKey{}).(string)
	ev := observe.AttemptEvent{System: c.name, Method: req.Method, Host: req.URL.Host, Path: pathOf(req), Route: route,
		Attempt: n, Hedge: h.k, Won: h.won, Op: op, Err: err, Duration: time.Since(t0), Outcome: observe.OutcomeOK}
	if c.faults != nil {
		ev.Injected = injected(resp, err)
	}
	failed := observe.OutcomeRetry
	if last {
		failed = observe.OutcomeGaveUp
	}
	switch {
	case h.lost:
		ev.Outcome = observe.OutcomeHedgeLost
		if resp != nil {
			ev.Status = resp.StatusCode
		}
	case resp != nil:
		ev.Status = resp.StatusCode
		switch {
		case policy.TemporaryStatus(resp.StatusCode) || policy.RetryStatus(resp.StatusCode, resp.Header):
			ev.Outcome = failed // a 409 the server said to retry is retried too
		case policy.UpstreamFailure(resp.StatusCode):
			ev.Outcome = observe.OutcomeFailed // a 501: the caller gets it, the breaker counts it
		}
	case op == observe.OpBreaker:
		ev.Outcome = observe.OutcomeBreakerOpen
	case op == observe.OpCanceled:
		ev.Outcome = observe.OutcomeCanceled
	case op == observe.OpCallTimeout, op == observe.OpBudgetTimeout:
		ev.Outcome = observe.OutcomeGaveUp
	default:
		ev.Outcome = failed
	}
	for _, o := range c.observers {
		o.ObserveAttempt(ev)
	}
}

func (c *Client) breakerChanged(from, to gobreaker.State) {
	for _, o := range c.observers {
		o.ObserveBreaker(c.name, breakerState(from), breakerState(to))
	}
}

// opOf returns the op of a call's error: 0 for none, OpTransport for an
// error that is not the registry's.
func opOf(err error) observe.Op {
	if err == nil {
		return 0
	}
	if e, ok := err.(*Error); ok {
		return e.Op
	}
	return observe.OpTransport
}
