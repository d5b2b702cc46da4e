package registry

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/internal/redact"
	"github.com/outbound-go/outbound/observe"
)

// retryStage sends a hop's attempts through the next stage until one
// gives an answer the caller should see, the policy allows no more, or
// the deadline would pass. Only replayable requests are retried (or
// hedged): a safe method or an Idempotency-Key, and a body that
// Request.GetBody can produce again. Waits follow Retry-After (up to
// RETRY_AFTER_MAX), else backoff with full jitter; every retry takes a
// token of the system's retry throttle. It is always in the chain.
type retryStage struct {
	c          *Client
	retries    int  // the policy's RETRIES
	idempotent bool // the policy's requests are replayable whatever their method (a route's IDEMPOTENT)
	next       attemptStage
}

// retrier is the state of one hop's retries.
type retrier struct {
	c       *Client
	cl      *call
	max     int   // attempts allowed
	lastErr error // the failure the last retry answered
	// lastOp and lastStatus are what ended the attempt the last retry
	// answered: its op (observe.OpStatus for a status) and its status.
	lastOp     observe.Op
	lastStatus int
}

func (s *retryStage) handle(cl *call) (*http.Response, error) {
	r := retrier{c: s.c, cl: cl, max: 1}
	if cl.replayable = replayable(cl.req, s.idempotent); cl.replayable {
		r.max = 1 + s.retries
	}
	a := &cl.attempt
	for n := 1; ; n++ {
		req, err := r.request(n)
		if err != nil {
			return nil, err
		}
		a.reset(req, n, n >= r.max)
		s.next.send(a)
		if done, resp, err := r.settle(a); done {
			return resp, err
		}
		if done, resp, err := r.next(a); done {
			return resp, err
		}
	}
}

// request returns attempt n's request: the hop's, with its body replayed
// for a retry and X-Time-Budget set to what is left now, on a copy.
func (r *retrier) request(n int) (*http.Request, error) {
	cl := r.cl
	req := cl.req
	if n > 1 && req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, cl.fail(observe.OpTransport, n-1, fmt.Errorf("replaying body: %w", err))
		}
		req = req.Clone(cl.ctx)
		req.Body = b
	}
	switch {
	case !cl.budgeted:
		return req, nil
	case req != cl.req:
		capbudget.SetHeader(cl.ctx, req.Header) // Clone copied the header map
		return req, nil
	case cl.fresh && n == 1:
		return req, nil // prepare set it a moment ago
	}
	return withBudget(cl.ctx, req), nil
}

// settle ends the hop on an attempt that needs no retry decision: a
// refusal (breaker, rate limit), an answer that is not temporary, or an
// error no retry can cure. done is false for a temporary failure.
func (r *retrier) settle(a *attempt) (done bool, _ *http.Response, _ error) {
	cl := r.cl
	switch {
	case a.err != nil && a.op.Outcome(false).Refused() && a.n == 1:
		closeBody(a.req)
		return true, nil, cl.end(&Error{System: r.c.name, Op: a.op, Method: cl.req.Method, URL: redact.Request(cl.req),
			Err: a.err}, a.op.Outcome(false))
	case a.err != nil && a.op.Outcome(false).Refused():
		// A retry refused (the breaker opened during the wait, the rate
		// limit had no token): the call ends as when retries run out,
		// on the failure the attempts sent met, with the refusal.
		closeBody(a.req)
		return true, nil, cl.end(&Error{System: r.c.name, Op: r.lastOp, Method: cl.req.Method, URL: redact.Request(cl.req),
			Attempts: a.n - 1, StatusCode: r.lastStatus, Err: joinCauses(r.lastErr, a.err)}, r.lastOp.Outcome(true))
	case a.err == nil && !policy.TemporaryStatus(a.resp.StatusCode) && !policy.RetryStatus(a.resp.StatusCode, a.resp.Header):
		cl.answered(a.resp, a.n, answerOutcome(a.resp.StatusCode))
		return true, a.resp, nil
	case a.err != nil && !a.op.Retryable():
		// The deadline or the caller ended the call, or a retry cannot
		// help (a bad request, a certificate error).
		return true, nil, cl.fail(a.op, a.n, withCause(a.err, cl.ctx))
	}
	return false, nil, nil
}

// answerOutcome labels a response the caller gets: failed when the
// breaker counts its status as a failure of the upstream (a 501), ok
// otherwise.
func answerOutcome(status int) observe.Outcome {
	if policy.UpstreamFailure(status) {
		return observe.OutcomeFailed
	}
	return observe.OutcomeOK
}

// next decides on a temporary failure (a temporary status, or a
// retryable error): retry after the policy's wait, or end the hop because
// retries ran out, the wait would pass the deadline, or the retry
// throttle has no token. done is false when the wait passed and the next
// attempt may go.
func (r *retrier) next(a *attempt) (done bool, _ *http.Response, _ error) {
	cl := r.cl
	wait, hint, last := policy.Plan(a.resp, r.cl.route.cfg, a.n, a.n >= r.max)
	switch {
	case last && a.err == nil:
		// Retries ran out on a status: the caller gets the last
		// response, body intact, as http.Client would.
		cl.answered(a.resp, a.n, observe.OutcomeGaveUp)
		return true, a.resp, nil
	case last:
		return true, nil, cl.fail(a.op, a.n, withCause(a.err, cl.ctx))
	case a.err == nil && r.c.breakerRefuses(cl.route):
		// The breaker would refuse the retry (this attempt may have
		// opened it): the caller gets this response, as when retries
		// run out, rather than a refusal that hides it.
		cl.answered(a.resp, a.n, observe.OutcomeGaveUp)
		return true, a.resp, nil
	case r.pastDeadline(wait):
		return true, nil, r.tooLate(a, wait, hint)
	case !r.c.retryBudget.Retry(time.Now()):
		resp, err := r.throttled(a)
		return true, resp, err
	}
	status := 0
	if a.err == nil {
		status = a.resp.StatusCode
		drainResponse(a.resp)
		r.lastErr, r.lastOp = fmt.Errorf("status %d", status), observe.OpStatus
	} else {
		r.lastErr, r.lastOp = a.err, a.op
	}
	r.lastStatus = status
	r.c.stats.retries.Add(1)
	if !policy.Sleep(cl.ctx, wait) {
		e := &Error{System: r.c.name, Op: classify(cl.ctx, r.lastErr), Method: cl.req.Method, URL: redact.Request(cl.req),
			Attempts: a.n, StatusCode: status, Err: withCause(r.lastErr, cl.ctx)}
		if status != 0 && e.Op != observe.OpCanceled {
			e.Op = observe.OpStatus
		}
		return true, nil, cl.end(e, e.Op.Outcome(true))
	}
	return false, nil, nil
}

// pastDeadline reports whether waiting wait would reach the deadline.
func (r *retrier) pastDeadline(wait time.Duration) bool {
	dl, ok := r.cl.ctx.Deadline()
	return ok && time.Until(dl) <= wait
}

// tooLate ends a hop whose next wait would pass the deadline, with the
// last failure, the deadline, and the upstream's Retry-After (so that the
// caller can pass it on).
func (r *retrier) tooLate(a *attempt, wait, hint time.Duration) error {
	cl := r.cl
	dl, _ := cl.ctx.Deadline()
	late := fmt.Errorf("retry in %v would pass the call's deadline (%v left): %w",
		wait.Round(time.Millisecond), time.Until(dl).Round(time.Millisecond), context.DeadlineExceeded)
	if a.err != nil {
		return cl.fail(a.op, a.n, joinCauses(a.err, late))
	}
	drainResponse(a.resp)
	return cl.end(&Error{System: r.c.name, Op: observe.OpStatus, Method: cl.req.Method, URL: redact.Request(cl.req),
		Attempts: a.n, StatusCode: a.resp.StatusCode, RetryAfter: hint, Err: late}, observe.OutcomeGaveUp)
}

// throttled ends a hop whose retry the retry throttle refused: the caller
// gets the last response, or the last error joined with
// ErrRetryThrottled.
func (r *retrier) throttled(a *attempt) (*http.Response, error) {
	cl := r.cl
	if a.err == nil {
		cl.answered(a.resp, a.n, observe.OutcomeRetryThrottled)
		return a.resp, nil
	}
	return nil, cl.end(&Error{System: r.c.name, Op: a.op, Method: cl.req.Method, URL: redact.Request(cl.req),
		Attempts: a.n, Err: joinCauses(a.err, ErrRetryThrottled)}, observe.OutcomeRetryThrottled)
}
