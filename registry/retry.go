package registry

import (
	"context"
	"fmt"
	"net/http"
	"time"
	"unsafe"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/drain"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
)

// retrier is the state of one call's retry stage.
type retrier struct {
	c       *Client
	req     *http.Request // the call's request, under its capped context
	ctx     context.Context
	max     int       // attempts allowed
	start   time.Time // zero without observers
	lastErr error     // the failure the last retry answered
	hedged  bool      // attempts go through the hedge stage
	// budgeted: req carries X-Time-Budget, set just before the first
	// attempt by prepare, in a header map of its own.
	budgeted bool
}

// retry is the retry stage: it sends attempts through the breaker stage
// (through the hedge stage when the system hedges) until one gives an
// answer the caller should see, the policy allows no more, or the
// deadline would pass. Only replayable requests are retried or hedged.
func (c *Client) retry(req *http.Request, budgeted bool) (*http.Response, error) {
	r := retrier{c: c, req: req, ctx: req.Context(), max: 1, budgeted: budgeted}
	if (c.cfg.Retries > 0 || c.hedger != nil) && replayable(req) {
		r.max = 1 + c.cfg.Retries
		r.hedged = c.hedger != nil
	}
	if len(c.observers) > 0 {
		r.start = time.Now()
	}
	for n := 1; ; n++ {
		areq, err := r.request(n)
		if err != nil {
			return nil, err
		}
		var resp *http.Response
		var op observe.Op
		if r.hedged {
			resp, op, err = c.hedge(areq, n, n >= r.max)
		} else {
			resp, op, err = c.pass(areq, n, n >= r.max)
		}
		if done, resp, err := r.settle(areq, n, resp, op, err); done {
			return resp, err
		}
		if done, resp, err := r.next(n, resp, op, err); done {
			return resp, err
		}
	}
}

// request returns attempt n's request: the call's, with its body replayed
// for a retry and X-Time-Budget set to what is left now, on a copy.
func (r *retrier) request(n int) (*http.Request, error) {
	areq := r.req
	if n > 1 && r.req.GetBody != nil {
		b, err := r.req.GetBody()
		if err != nil {
			return nil, r.c.fail(r.req, observe.OpTransport, n-1, 0, fmt.Errorf("replaying body: %w", err), r.start)
		}
		areq = r.req.Clone(r.ctx)
		areq.Body = b
	}
	if _, ok := r.ctx.Deadline(); !ok || r.c.cfg.OmitTimeBudget {
		return areq, nil
	}
	// Set per attempt: its value is what is left now.
	if areq == r.req {
		if r.budgeted && n == 1 {
			return areq, nil // prepare set it a moment ago
		}
		return withBudget(r.ctx, areq), nil
	}
	capbudget.SetHeader(r.ctx, areq.Header) // Clone copied the header map
	return areq, nil
}

// settle ends the call on an attempt that needs no retry decision: a
// breaker refusal, an answer that is not temporary, or an error no retry
// can cure. done is false for a temporary failure.
func (r *retrier) settle(areq *http.Request, n int, resp *http.Response, op observe.Op, err error) (done bool, _ *http.Response, _ error) {
	c := r.c
	switch {
	case op == observe.OpBreaker:
		closeBody(areq)
		if r.lastErr != nil {
			// Name the attempts already sent and the failure that
			// preceded the refusal.
			err = &Error{System: c.name, Op: observe.OpBreaker, Method: r.req.Method, URL: redactedURL(r.req),
				Attempts: n - 1, Err: join(err.(*Error).Err, r.lastErr)}
		}
		c.stats.breakerRejected.Add(1)
		return true, nil, c.failWith(r.req, err, n-1, observe.OutcomeBreakerOpen, r.start)
	case err == nil && !policy.TemporaryStatus(resp.StatusCode) && !policy.RetryStatus(resp.StatusCode, resp.Header):
		c.stats.ok.Add(1)
		out := observe.OutcomeOK
		if policy.UpstreamFailure(resp.StatusCode) {
			out = observe.OutcomeFailed // a 501: an answer, and a failure of the upstream
		}
		c.observeCall(r.req, n, resp.StatusCode, nil, out, r.start)
		return true, resp, nil
	case err != nil && !retryableOp(op):
		// The deadline or the caller ended the call, or a retry cannot
		// help (a bad request, a certificate error).
		return true, nil, c.fail(r.req, op, n, 0, withCause(err, r.ctx), r.start)
	}
	return false, nil, nil
}

// next decides on a temporary failure (a temporary status in resp, or a
// retryable err): retry after the policy's wait, or end the call because
// retries ran out, the wait would pass the deadline, or the retry budget
// is spent. done is false when the wait passed and the next attempt may go.
func (r *retrier) next(n int, resp *http.Response, op observe.Op, err error) (done bool, _ *http.Response, _ error) {
	c := r.c
	wait, hint, last := r.plan(n, resp)
	switch {
	case last && err == nil:
		// Retries ran out on a status: the caller gets the last
		// response, body intact, as http.Client would.
		c.stats.gaveUp.Add(1)
		c.observeCall(r.req, n, resp.StatusCode, nil, observe.OutcomeGaveUp, r.start)
		return true, resp, nil
	case last:
		return true, nil, c.fail(r.req, op, n, 0, withCause(err, r.ctx), r.start)
	case r.pastDeadline(wait):
		return true, nil, r.tooLate(n, resp, op, err, wait, hint)
	case !c.budget.retry(time.Now()):
		resp, err := r.budgetSpent(n, resp, op, err)
		return true, resp, err
	}
	status := 0
	if err == nil {
		status = resp.StatusCode
		drainClose(resp)
		r.lastErr = fmt.Errorf("status %d", status)
	} else {
		r.lastErr = err
	}
	c.stats.retries.Add(1)
	if !sleep(r.ctx, wait) {
		op := classify(r.ctx, r.lastErr)
		if status != 0 && op != observe.OpCanceled {
			op = observe.OpStatus
		}
		return true, nil, c.fail(r.req, op, n, status, withCause(r.lastErr, r.ctx), r.start)
	}
	return false, nil, nil
}

// plan applies the policy to attempt n's temporary failure: the wait
// before the next attempt (Retry-After, else backoff with full jitter),
// the upstream's hint (0: none), and whether no attempt may follow. A
// hint longer than RETRY_AFTER_MAX makes this attempt the last: the caller
// gets the response.
func (r *retrier) plan(n int, resp *http.Response) (wait, hint time.Duration, last bool) {
	// The server's "do not retry" (X-Should-Retry, Stripe-Should-Retry)
	// makes this attempt the last.
	last = n >= r.max || (resp != nil && !policy.RetryStatus(resp.StatusCode, resp.Header))
	if resp != nil {
		if ra, ok := policy.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			if ra > r.c.cfg.RetryAfterMax {
				return 0, 0, true
			}
			wait, hint = ra, ra
		}
	}
	if !last && wait == 0 {
		wait = policy.Backoff(r.c.cfg.BackoffBase, r.c.cfg.BackoffMax, n)
	}
	return wait, hint, last
}

// pastDeadline reports whether waiting wait would reach the deadline.
func (r *retrier) pastDeadline(wait time.Duration) bool {
	dl, ok := r.ctx.Deadline()
	return ok && time.Until(dl) <= wait
}

// tooLate ends a call whose next wait would pass the deadline, with the
// last failure, the deadline, and the upstream's Retry-After (so that the
// caller can pass it on).
func (r *retrier) tooLate(n int, resp *http.Response, op observe.Op, err error, wait, hint time.Duration) error {
	dl, _ := r.ctx.Deadline()
	cause := fmt.Errorf("retry in %v would pass the call's deadline (%v left): %w",
		wait.Round(time.Millisecond), time.Until(dl).Round(time.Millisecond), context.DeadlineExceeded)
	if err != nil {
		return r.c.fail(r.req, op, n, 0, join(err, cause), r.start)
	}
	drainClose(resp)
	r.c.stats.gaveUp.Add(1)
	return r.c.failWith(r.req, &Error{System: r.c.name, Op: observe.OpStatus, Method: r.req.Method, URL: redactedURL(r.req),
		Attempts: n, StatusCode: resp.StatusCode, RetryAfter: hint, Err: cause}, n, observe.OutcomeGaveUp, r.start)
}

// budgetSpent ends a call whose retry the retry budget refused: the
// caller gets the last response, or the last error joined with
// ErrRetryBudget.
func (r *retrier) budgetSpent(n int, resp *http.Response, op observe.Op, err error) (*http.Response, error) {
	c := r.c
	c.stats.retryBudgetDenied.Add(1)
	if err == nil {
		c.observeCall(r.req, n, resp.StatusCode, ErrRetryBudget, observe.OutcomeRetryBudget, r.start)
		return resp, nil
	}
	return nil, c.failWith(r.req, &Error{System: c.name, Op: op, Method: r.req.Method, URL: redactedURL(r.req),
		Attempts: n, Err: join(err, ErrRetryBudget)}, n, observe.OutcomeRetryBudget, r.start)
}

// replayable reports whether req may be sent more than once: a safe
// method or an Idempotency-Key, and a body that can be produced again.
func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, "":
	default:
		if req.Header.Get("Idempotency-Key") == "" {
			return false
		}
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// retryableOp reports whether an attempt that failed with op may be
// retried.
func retryableOp(op observe.Op) bool {
	switch op {
	case observe.OpCanceled, observe.OpBudgetTimeout, observe.OpCallTimeout, observe.OpRequest, observe.OpTLS:
		return false
	}
	return true
}

// drainClose drains resp's body within drain's size and time bounds and
// closes it, so that its connection can go back to the pool before a
// retry; a body that stalls costs its connection, not the call's time.
func drainClose(resp *http.Response) {
	_ = drain.Close(resp.Body, resp.ContentLength, nil)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// attemptRequest is an attempt's shallow copy of the call's request,
// allocated together with its X-Time-Budget value and that value's bytes.
type attemptRequest struct {
	req    http.Request
	budget [1]string
	digits [20]byte
}

// withBudget copies req under ctx with a copy of its header map (values
// shared), so that the attempt's headers can be set without touching the
// caller's request, and sets X-Time-Budget in it with capbudget's
// formatter. The copy, the value slice and the value's bytes are one
// allocation (plus the map).
func withBudget(ctx context.Context, req *http.Request) *http.Request {
	// WithContext inlines: its copy stays on the stack.
	a := &attemptRequest{req: *req.WithContext(ctx)}
	h := make(http.Header, len(req.Header)+1)
	for k, v := range req.Header {
		h[k] = v
	}
	v, _ := capbudget.AppendHeaderValue(ctx, a.digits[:0]) // at most 18 bytes: stays in digits
	// The string points into a, which it keeps alive; digits is never
	// written again.
	a.budget[0] = unsafe.String(unsafe.SliceData(v), len(v))
	h[capbudget.Header] = a.budget[:]
	a.req.Header = h
	return &a.req
}
