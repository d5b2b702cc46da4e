package registry

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/redact"
	"github.com/outbound-go/outbound/observe"
)

// This file is the entry of a call: the refusals that cost no I/O, the
// bulkhead and budget stages, and the request of the first hop.

// refuse fails a call that cannot run, before the bulkhead: a closed
// registry, a path that climbs above BASE_URL, an absolute URL of another
// origin, a spent budget, an open (or forced open) breaker. It costs no
// I/O, no goroutine and one allocation (the caller's own error).
func (c *Client) refuse(req *http.Request, p *route) error {
	switch {
	case c.closed.Load():
		return &Error{System: c.name, Op: observe.OpClosed, Err: ErrClosed}
	case req.URL != nil && req.URL.Host == "" && escapesBase(req.URL.Path):
		return &Error{System: c.name, Op: observe.OpRequest, Method: req.Method, URL: redact.Request(req), Err: ErrPathEscapesBase}
	case req.URL != nil && req.URL.Host != "" && !sameOrigin(req.URL, c.base):
		return &Error{System: c.name, Op: observe.OpRequest, Method: req.Method, URL: redact.Request(req),
			Err: &originError{got: urlString(req.URL), base: urlString(c.base)}}
	}
	ctx := req.Context()
	if err := capbudget.Check(ctx, capbudget.DefaultReserve); err != nil {
		// A deadline that passed (whatever its cause) is a spent budget;
		// only a cancellation is the caller giving up.
		if ctx.Err() == context.Canceled {
			return c.refused(req, p, observe.OpCanceled, err)
		}
		return c.refused(req, p, observe.OpBudget, capbudget.ErrExhausted)
	}
	switch c.force.State() {
	case observe.BreakerOpen:
		return c.refused(req, p, observe.OpForcedOpen, breaker.ForcedOpen)
	case observe.BreakerClosed:
		return nil // an operator overrides the breaker's judgement
	}
	if circuitOpen(p.cb) {
		return c.refused(req, p, observe.OpBreaker, breaker.Open)
	}
	return nil
}

// admit is the bulkhead stage: one permit, waiting at most
// BULKHEAD_MAX_WAIT, in the body that will carry it back, with the
// call's capped context from the budget stage (budget). When the bulkhead
// waits, the wait counts against CALL_TIMEOUT: the deadline starts before
// it. A caller that cancels while waiting is not refused by the bulkhead:
// its error is its cancellation.
func (c *Client) admit(req *http.Request, p *route) (*body, error) {
	if p.cfg.BulkheadMaxWait == 0 {
		if !c.bh.TryAcquire() {
			return nil, c.refused(req, p, observe.OpBulkhead, bulkhead.ErrFull)
		}
		b, capped := c.budget(req.Context(), p.cfg.CallTimeout)
		c.begin(b, req, p, capped)
		return b, nil
	}
	b, capped := c.budget(req.Context(), p.cfg.CallTimeout)
	if err := c.bh.Acquire(b.Permit.Ctx()); err != nil {
		b.Permit.Stop()
		b.Permit.End()
		if errors.Is(err, bulkhead.ErrFull) {
			return nil, c.refused(req, p, observe.OpBulkhead, err)
		}
		return nil, c.refused(req, p, observe.OpCanceled, err)
	}
	c.begin(b, req, p, capped)
	return b, nil
}

// budget is the budget stage: the call's deadline is its policy's
// CALL_TIMEOUT (callTimeout), or
// the caller's remaining budget less the reserve if that is sooner
// (capped), in the capped context of the body that will carry
// the permit.
func (c *Client) budget(ctx context.Context, callTimeout time.Duration) (_ *body, capped bool) {
	b := &body{}
	d, cause := callTimeout, capbudget.ErrCallTimeout
	if rem, ok := capbudget.Remaining(ctx, capbudget.DefaultReserve); ok && rem < d {
		d, cause, capped = rem, capbudget.ErrExhausted, true
	}
	b.Permit.Start(&c.owner, ctx, d, cause)
	return b, capped
}

// begin starts an admitted call: its counters, its retry throttle's
// deposit, a stream's own timer (WithStream) in place of CALL_TIMEOUT,
// and the watch that gives the permit back when the caller's context
// ends.
func (c *Client) begin(b *body, req *http.Request, p *route, capped bool) {
	c.stats.calls.Add(1)
	if p.name != "" {
		p.calls.Add(1)
	}
	if capped {
		c.stats.capped.Add(1)
	}
	now := time.Now()
	c.retryBudget.Call(now)
	if idle, ok := streamIdle(req.Context()); ok {
		b.Permit.StartStream(startStream(req.Context(), p.cfg.CallTimeout, idle))
	}
	b.Permit.Watch()
	b.Call = call{c: c, route: p, ctx: b.Permit.Ctx()}
	b.Call.attempt.call = &b.Call
	if c.timed {
		b.Call.start = now
	}
}

// prepare makes the call's own copy of req for its first hop, under the
// call's capped context, and the request of its first attempt, which
// carries X-Time-Budget when the system receives one and the call has a
// deadline (request.go), or fails the call on a request
// http.Client would refuse too.
func (c *Client) prepare(req *http.Request, cl *call) error {
	cl.req = req // until the call has its own: what a failure names
	omit := cl.route.cfg.OmitTimeBudget
	if err := firstRequest(cl.ctx, req, requestTarget{Base: c.base, OmitBudget: omit}, &cl.own); err != nil {
		return cl.fail(observe.OpRequest, 0, err)
	}
	cl.req = &cl.own
	if _, deadline := cl.ctx.Deadline(); deadline && !omit { // a stream's has none unless the caller's has
		var pool *requestPool
		if cl.route.lend {
			pool = &c.lend
		}
		cl.req, cl.lent = attemptRequest(cl.ctx, &cl.own, pool)
		cl.budgeted, cl.fresh = true, true
	}
	return nil
}
