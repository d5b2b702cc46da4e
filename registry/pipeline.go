package registry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// One call, top to bottom, in the order of the README's drawing:
//
//	call          this file: refuse fast, then
//	  admit       the bulkhead stage, which also caps the budget (capCall)
//	  follow      the redirect engine (redirect.go) over
//	    retry     the retry stage (retry.go), each attempt through
//	      pass    the breaker stage (breaker.go) to
//	        send  the transport stage (send.go)
//
// and the response body carries the permit back (body.go).

// call runs one call through the pipeline: the fast refusals, the
// bulkhead and budget stages, then send (follow, the redirect engine
// over the retry stage). The permit and the deadline travel with the response body
// and end when it is closed.
func (c *Client) call(req *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if err := c.refuse(req); err != nil {
		closeBody(req)
		return nil, err
	}
	b, budgetCapped, err := c.admit(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	c.stats.calls.Add(1)
	if budgetCapped {
		c.stats.capped.Add(1)
	}
	c.budget.call(time.Now())

	if idle, ok := streamIdle(req.Context()); ok {
		// A stream: its timer (stream.go) stands for CALL_TIMEOUT.
		b.p.stop()
		b.p.end()
		b.p.ctx, b.p.cancel, b.p.stream = c.streamCall(req.Context(), idle)
	}
	ctx := b.p.ctx
	b.p.watch(req.Context())
	t0 := c.admitted()
	resp, err := send(c.prepare(req, ctx))
	if c.bh.Adaptive() {
		c.record(t0, resp, err)
	}
	if err != nil {
		b.p.done()
		return nil, err
	}
	return b.wrap(resp), nil
}

// refuse fails a call that cannot run, before the bulkhead: a closed
// registry, a path that climbs above BASE_URL, an absolute URL of another
// origin, a spent budget, an open breaker. It costs no I/O, no goroutine and one allocation (the caller's
// own error).
func (c *Client) refuse(req *http.Request) error {
	switch {
	case c.closed.Load():
		return &Error{System: c.name, Op: observe.OpClosed, Err: ErrClosed}
	case req.URL != nil && req.URL.Host == "" && escapesBase(req.URL.Path):
		return &Error{System: c.name, Op: observe.OpRequest, Method: req.Method, Err: ErrPathEscapesBase}
	case req.URL != nil && req.URL.Host != "" && !sameOrigin(req.URL, c.base):
		return c.otherOrigin(req)
	}
	ctx := req.Context()
	if err := capbudget.Check(ctx, capbudget.DefaultReserve); err != nil {
		// A deadline that passed (whatever its cause) is a spent budget;
		// only a cancellation is the caller giving up.
		if ctx.Err() == context.Canceled {
			return c.rejected(req, observe.OpCanceled, err, observe.OutcomeCanceled)
		}
		c.stats.budgetRejected.Add(1)
		return c.rejected(req, observe.OpBudget, capbudget.ErrExhausted, observe.OutcomeBudgetSpent)
	}
	if c.cb.State() == gobreaker.StateOpen {
		c.stats.breakerRejected.Add(1)
		return c.rejected(req, observe.OpBreaker, errOpenState, observe.OutcomeBreakerOpen)
	}
	return nil
}

// admit is the bulkhead stage: one permit, waiting at most
// BULKHEAD_MAX_WAIT, and the call's capped context from the budget stage
// (capCall), in the body that will carry them back. When the bulkhead
// waits, the wait counts against CALL_TIMEOUT: the deadline starts before
// it. A caller that cancels while waiting is not refused by the bulkhead:
// its error is its cancellation.
func (c *Client) admit(req *http.Request) (_ *body, budgetCapped bool, _ error) {
	if c.cfg.BulkheadMaxWait == 0 {
		if !c.bh.TryAcquire() {
			return nil, false, c.rejected(req, observe.OpBulkhead, bulkhead.ErrFull, observe.OutcomeBulkheadFull)
		}
		b, capped := c.capCall(req.Context())
		return b, capped, nil
	}
	b, capped := c.capCall(req.Context())
	if err := c.bh.Acquire(b.p.ctx); err != nil {
		b.p.stop()
		b.p.end()
		if errors.Is(err, bulkhead.ErrFull) {
			return nil, false, c.rejected(req, observe.OpBulkhead, err, observe.OutcomeBulkheadFull)
		}
		return nil, false, c.rejected(req, observe.OpCanceled, err, observe.OutcomeCanceled)
	}
	return b, capped, nil
}

// capCall is the budget stage: the call's deadline is CALL_TIMEOUT, or the
// caller's remaining budget less the reserve if that is sooner
// (budgetCapped), in the context (callCtx) of the body that will carry the
// permit.
func (c *Client) capCall(ctx context.Context) (_ *body, budgetCapped bool) {
	b := &body{p: permit{c: c}}
	d, cause, capped := budget(ctx, c.cfg.CallTimeout)
	b.p.start(ctx, d, cause)
	return b, capped
}

// rejected builds the error of a call refused before any attempt and
// tells the observers.
func (c *Client) rejected(req *http.Request, op observe.Op, cause error, out observe.Outcome) *Error {
	err := &Error{System: c.name, Op: op, Err: cause}
	c.observeRejected(req, out, err)
	return err
}

// prepare returns the call's copy of req, under the capped context: a
// relative URL joined to BASE_URL, BASE_URL's userinfo as Basic auth,
// and X-Time-Budget set to what is left now when the system receives one
// (budgeted), in a header map of the copy's own; otherwise without the
// header, not even one the caller set. One copy serves the call and its
// first attempt (withBudget).
func (c *Client) prepare(req *http.Request, ctx context.Context) *http.Request {
	var r2 *http.Request
	own := c.budgeted(ctx) // r2.Header is r2's own
	if own {
		r2 = withBudget(ctx, req)
	} else {
		r2 = req.WithContext(ctx)
	}
	if r2.URL != nil && r2.URL.Host == "" {
		r2.URL = c.resolve(r2.URL)
		if u := c.base.User; u != nil && r2.Header.Get("Authorization") == "" {
			// BASE_URL's userinfo is Basic auth, on Do and HTTPClient
			// alike (http.Client sets it only for URLs it was given).
			if !own {
				r2.Header = r2.Header.Clone()
				if r2.Header == nil {
					r2.Header = make(http.Header)
				}
				own = true
			}
			pw, _ := u.Password()
			r2.SetBasicAuth(u.Username(), pw)
		}
	}
	if c.cfg.OmitTimeBudget && r2.Header.Get(capbudget.Header) != "" {
		// The system never receives the header, not even one the caller
		// set (a third party has no use for our budget).
		if !own {
			r2.Header = r2.Header.Clone()
		}
		r2.Header.Del(capbudget.Header)
	}
	return r2
}

// budgeted reports whether the call's requests carry X-Time-Budget: the
// system receives one and the call has a deadline.
func (c *Client) budgeted(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok && !c.cfg.OmitTimeBudget
}

// resolve joins a relative URL to BASE_URL: the path is appended to the
// base path, and the query is the base query followed by the request's.
func (c *Client) resolve(rel *url.URL) *url.URL {
	u := *c.base
	u.Path = strings.TrimSuffix(c.base.Path, "/") + "/" + strings.TrimPrefix(rel.Path, "/")
	if rel.RawPath != "" || c.base.RawPath != "" {
		u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + "/" + strings.TrimPrefix(rel.EscapedPath(), "/")
	}
	switch {
	case c.base.RawQuery == "":
		u.RawQuery = rel.RawQuery
	case rel.RawQuery != "":
		u.RawQuery = c.base.RawQuery + "&" + rel.RawQuery
	}
	u.Fragment = ""
	return &u
}

// escapesBase reports whether a relative path climbs above its root with
// "..": joined to BASE_URL's path, "../admin" or "a/../../x" would leave
// it. Paths built from user input ("/stock/"+isbn) must not reach another
// API of the same host.
func escapesBase(p string) bool {
	if !strings.Contains(p, "..") {
		return false
	}
	depth := 0
	for p != "" {
		var seg string
		seg, p, _ = strings.Cut(p, "/")
		switch {
		case seg == "" || seg == ".":
		case seg == "..":
			if depth--; depth < 0 {
				return true
			}
		case strings.HasPrefix(seg, "..;") || strings.HasPrefix(seg, `..\`):
			// "..;" (Tomcat, Spring) and "..\" (proxies that turn \
			// into /) climb too on some servers: refuse them outright.
			return true
		default:
			depth++
		}
	}
	return false
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
