package registry

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/sony/gobreaker/v2"
)

// This file builds the errors a call ends with and tells the observers:
// the stages say what happened, these functions say it the same way each
// time.

// fail ends a call that sent attempts with an *Error of op and counts it
// as given up (or cancelled).
func (c *Client) fail(req *http.Request, op Op, attempts, status int, err error, start time.Time) error {
	out := OutcomeGaveUp
	if op == OpCanceled {
		out = OutcomeCanceled
	}
	c.stats.gaveUp.Add(1)
	return c.failWith(req, &Error{System: c.name, Op: op, Method: req.Method, URL: redactedURL(req),
		Attempts: attempts, StatusCode: status, Err: err}, attempts, out, start)
}

func (c *Client) failWith(req *http.Request, err error, attempts int, out Outcome, start time.Time) error {
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

func (c *Client) observeCall(req *http.Request, attempts, status int, err error, out Outcome, start time.Time) {
	if len(c.observers) == 0 {
		return
	}
	ev := CallEvent{System: c.name, Method: req.Method, Attempts: attempts, Status: status, Err: err,
		Duration: time.Since(start), Outcome: out}
	for _, o := range c.observers {
		o.ObserveCall(ev)
	}
}

func (c *Client) observeRejected(req *http.Request, out Outcome, err error) {
	for _, o := range c.observers {
		o.ObserveCall(CallEvent{System: c.name, Method: req.Method, Err: err, Outcome: out})
	}
}

// observeAttempt tells the observers how attempt n ended. A failed
// attempt is a retry unless last says none can follow.
func (c *Client) observeAttempt(req *http.Request, n int, last bool, resp *http.Response, op Op, err error, t0 time.Time) {
	if len(c.observers) == 0 {
		return
	}
	ev := AttemptEvent{System: c.name, Method: req.Method, Host: req.URL.Host, Path: pathOf(req),
		Attempt: n, Err: err, Duration: time.Since(t0), Outcome: OutcomeOK}
	if c.faults != nil {
		ev.Injected = injected(resp, err)
	}
	failed := OutcomeRetry
	if last {
		failed = OutcomeGaveUp
	}
	switch {
	case resp != nil:
		ev.Status = resp.StatusCode
		if policy.TemporaryStatus(resp.StatusCode) {
			ev.Outcome = failed
		}
	case op == OpBreaker:
		ev.Outcome = OutcomeBreakerOpen
	case op == OpCanceled:
		ev.Outcome = OutcomeCanceled
	case op == OpCallTimeout, op == OpBudgetTimeout:
		ev.Outcome = OutcomeGaveUp
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
