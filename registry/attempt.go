package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/config"
	"github.com/sony/gobreaker/v2"
)

// retryRoundTrip runs the retry stage: it sends attempts through the
// breaker until one gives a response the caller should see, the policy
// allows no more, or the deadline would pass. req carries the call's
// capped context.
func (c *Client) retryRoundTrip(req *http.Request) (*http.Response, error) {
	maxAttempts := 1
	if c.cfg.Retries > 0 && replayable(req) {
		maxAttempts = 1 + c.cfg.Retries
	}
	ctx := req.Context()
	var start time.Time
	if len(c.observers) > 0 {
		start = time.Now()
	}
	var lastErr error
	for n := 1; ; n++ {
		areq := req
		if n > 1 {
			if req.GetBody != nil {
				b, err := req.GetBody()
				if err != nil {
					return nil, c.fail(req, OpTransport, n-1, 0, fmt.Errorf("replaying body: %w", err), start)
				}
				areq = req.Clone(ctx)
				areq.Body = b
			}
		}
		// X-Time-Budget: what is left now, on a copy of the request. Set
		// here rather than once in call(): on Do's path http.Client
		// clones the first request's header for its redirects, and a
		// header set before it costs that clone two more allocations.
		if deadline, ok := ctx.Deadline(); ok && !c.cfg.OmitTimeBudget {
			if areq == req {
				areq = withBudget(req, deadline)
			} else {
				capbudget.SetHeader(areq.Header, ctx)
			}
		}

		resp, op, err := c.attempt(areq, n, n >= maxAttempts)
		switch {
		case op == OpBreaker:
			closeBody(areq)
			if lastErr != nil {
				// This one carries the attempts already sent and the
				// failure that preceded the refusal.
				err = &Error{System: c.name, Op: OpBreaker, Method: req.Method, URL: redactedURL(req),
					Attempts: n - 1, Err: join(err.(*Error).Err, lastErr)}
			}
			c.stats.breakerRejected.Add(1)
			return nil, c.failWith(req, err, n-1, OutcomeBreakerOpen, start)
		case err == nil && !retryableStatus(resp.StatusCode):
			c.stats.ok.Add(1)
			c.observeCall(req, n, resp.StatusCode, nil, OutcomeOK, start)
			return resp, nil
		case err != nil && !retryableOp(op):
			// The deadline or the caller ended the call, or a retry
			// cannot help (a bad request, a certificate error).
			return nil, c.fail(req, op, n, 0, withCause(err, ctx), start)
		}

		// A temporary failure: retry if the policy and the clock allow.
		var wait, hint time.Duration
		status := 0
		last := n >= maxAttempts
		if err == nil {
			status = resp.StatusCode
			ra, hasRA := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
			switch {
			case hasRA && ra > c.cfg.RetryAfterMax:
				last = true // the hint is longer than we honour: the caller gets the response
			case hasRA:
				wait, hint = ra, ra
			}
		}
		if !last && wait == 0 {
			wait = backoff(c.cfg.BackoffBase, c.cfg.BackoffMax, n)
		}
		if last {
			if err == nil {
				// Retries ran out on a status: the caller gets the last
				// response, body intact, as http.Client would.
				c.stats.gaveUp.Add(1)
				c.observeCall(req, n, status, nil, OutcomeGaveUp, start)
				return resp, nil
			}
			return nil, c.fail(req, op, n, 0, withCause(err, ctx), start)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			// Waiting would pass the deadline: stop now with the last
			// failure and the deadline both visible.
			cause := fmt.Errorf("retry in %v would pass the call's deadline (%v left): %w",
				wait.Round(time.Millisecond), time.Until(dl).Round(time.Millisecond), context.DeadlineExceeded)
			if err == nil {
				drainClose(resp)
				// The upstream's hint travels on the error: the caller
				// can pass it on to its own client.
				e := &Error{System: c.name, Op: OpStatus, Method: req.Method, URL: redactedURL(req),
					Attempts: n, StatusCode: status, RetryAfter: hint, Err: cause}
				c.stats.gaveUp.Add(1)
				return nil, c.failWith(req, e, n, OutcomeGaveUp, start)
			}
			return nil, c.fail(req, op, n, 0, join(err, cause), start)
		}
		if !c.budget.retry(time.Now()) {
			c.stats.retryBudgetDenied.Add(1)
			if err == nil {
				c.observeCall(req, n, status, ErrRetryBudget, OutcomeRetryBudget, start)
				return resp, nil
			}
			return nil, c.failWith(req, &Error{System: c.name, Op: op, Method: req.Method, URL: redactedURL(req), Attempts: n,
				Err: join(err, ErrRetryBudget)}, n, OutcomeRetryBudget, start)
		}
		if err == nil {
			drainClose(resp)
			lastErr = fmt.Errorf("status %d", status)
		} else {
			lastErr = err
		}
		c.stats.retries.Add(1)
		if !sleep(ctx, wait) {
			op := classify(ctx, lastErr)
			if status != 0 && op != OpCanceled {
				op = OpStatus
			}
			return nil, c.fail(req, op, n, status, withCause(lastErr, ctx), start)
		}
	}
}

// attempt sends one attempt through the breaker. op classifies err.
// last says no retry can follow it: a failed last attempt is reported to
// observers as gave_up rather than retry.
func (c *Client) attempt(req *http.Request, n int, last bool) (*http.Response, Op, error) {
	var t0 time.Time
	if len(c.observers) > 0 {
		t0 = time.Now()
	}
	var op Op
	resp, err := c.cb.Execute(func() (*http.Response, error) {
		var avail time.Duration = -1
		if dl, ok := req.Context().Deadline(); ok {
			avail = time.Until(dl)
		}
		resp, err := c.rt.RoundTrip(req)
		if err != nil {
			op = classify(req.Context(), err)
			if excluded(op, avail) {
				return nil, &excludedError{err}
			}
			return nil, err
		}
		if breakerFailureStatus(resp.StatusCode) {
			return resp, errFailedStatus
		}
		return resp, nil
	})
	switch {
	case err == nil:
	case errors.Is(err, gobreaker.ErrOpenState):
		resp, err, op = nil, &Error{System: c.name, Op: OpBreaker, Err: errOpenState}, OpBreaker
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		resp, err, op = nil, &Error{System: c.name, Op: OpBreaker, Err: errProbesBusy}, OpBreaker
	case err == errFailedStatus:
		err = nil
	default:
		if ex, ok := err.(*excludedError); ok {
			err = ex.err
		}
	}
	if len(c.observers) > 0 {
		ev := AttemptEvent{System: c.name, Method: req.Method, Host: req.URL.Host, Path: pathOf(req),
			Attempt: n, Err: err, Duration: time.Since(t0), Outcome: OutcomeOK}
		failed := OutcomeRetry
		if last {
			failed = OutcomeGaveUp
		}
		if resp != nil {
			ev.Status = resp.StatusCode
			if retryableStatus(resp.StatusCode) {
				ev.Outcome = failed
			}
		} else {
			ev.Outcome = failed
			switch op {
			case OpBreaker:
				ev.Outcome = OutcomeBreakerOpen
			case OpCanceled:
				ev.Outcome = OutcomeCanceled
			case OpCallTimeout, OpBudgetTimeout:
				ev.Outcome = OutcomeGaveUp
			}
		}
		for _, o := range c.observers {
			o.ObserveAttempt(ev)
		}
	}
	return resp, op, err
}

// minFairAttempt is the least time an attempt must have had before the
// caller's deadline cut it for the cut to count against the upstream. An
// attempt cut sooner never had a chance and is excluded; one cut later is
// an attempt timeout like any other, so a hung upstream still opens the
// breaker when every caller brings a short budget.
const minFairAttempt = 100 * time.Millisecond

// excluded reports whether an attempt that failed with op, having had
// avail before its deadline (-1: none), is neither a success nor a failure
// for the breaker: the caller cancelled, the request was bad before any
// I/O, or the caller's budget left the attempt no fair chance.
func excluded(op Op, avail time.Duration) bool {
	switch op {
	case OpCanceled, OpRequest:
		return true
	case OpBudgetTimeout:
		return avail >= 0 && avail < minFairAttempt
	}
	return false
}

// retryableOp reports whether an attempt that failed with op may be
// retried.
func retryableOp(op Op) bool {
	switch op {
	case OpCanceled, OpBudgetTimeout, OpCallTimeout, OpRequest, OpTLS:
		return false
	}
	return true
}

// classify names the phase a transport error comes from. ctx is the
// call's capped context.
func classify(ctx context.Context, err error) Op {
	switch ctx.Err() {
	case nil:
	case context.Canceled:
		return OpCanceled
	default: // a deadline: ours (CALL_TIMEOUT) or the caller's budget
		if errors.Is(context.Cause(ctx), capbudget.ErrCallTimeout) {
			return OpCallTimeout
		}
		return OpBudgetTimeout
	}
	var op *net.OpError
	if errors.As(err, &op) {
		switch {
		case op.Op == "dial" && op.Timeout():
			return OpConnectTimeout
		case op.Op == "dial":
			return OpConnect
		case op.Op == "remote error" && op.Err != nil && certAlert(op.Err.Error()):
			// The server refused the handshake over our certificate or
			// version: the same certificate gets the same answer.
			return OpTLS
		}
	}
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		return OpTLS // we refused the server's certificate
	}
	// net/http exports no type for these timeouts and request checks;
	// match the text it has used for years.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "TLS handshake timeout"):
		return OpTLSTimeout
	case strings.Contains(msg, "timeout awaiting response headers"):
		return OpReadTimeout
	case strings.HasPrefix(msg, "net/http: invalid header field"),
		strings.HasPrefix(msg, "net/http: invalid method"),
		strings.HasPrefix(msg, "net/http: nil Request"),
		strings.HasPrefix(msg, "unsupported protocol scheme"),
		strings.HasPrefix(msg, "http: no Host in request URL"):
		return OpRequest
	}
	return OpTransport
}

// certAlert reports whether a TLS alert from the server (net/http reports
// it as a *net.OpError "remote error" wrapping an unexported type, so the
// text is all there is) is about certificates, versions or access: alerts
// a retry with the same configuration cannot change. "internal error" and
// the like stay retryable.
func certAlert(msg string) bool {
	for _, a := range []string{"bad certificate", "unsupported certificate", "certificate revoked",
		"certificate expired", "certificate unknown", "unknown certificate authority", "access denied",
		"certificate required", "handshake failure", "protocol version", "insufficient security"} {
		if strings.Contains(msg, a) {
			return true
		}
	}
	return false
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
// allocated together with the value slice of its X-Time-Budget header.
type attemptRequest struct {
	req    http.Request
	budget [1]string
}

// withBudget copies req with a copy of its header map (values shared), so
// that the attempt's headers can be set without touching the caller's
// request, and sets X-Time-Budget in it as capbudget.SetHeader would for a
// context with this deadline: the whole milliseconds left, rounded down,
// at least 0 and at most capbudget.MaxBudget. The copy and the header's
// value slice are one allocation.
func withBudget(req *http.Request, deadline time.Time) *http.Request {
	a := &attemptRequest{req: *req}
	h := make(http.Header, len(req.Header)+1)
	for k, v := range req.Header {
		h[k] = v
	}
	ms := min(max(time.Until(deadline).Milliseconds(), 0), int64(capbudget.MaxBudget/time.Millisecond))
	var buf [20]byte
	a.budget[0] = string(strconv.AppendInt(buf[:0], ms, 10))
	h[capbudget.Header] = a.budget[:]
	a.req.Header = h
	return &a.req
}

// redactedURL renders req's URL without userinfo or token-like query
// values.
func redactedURL(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	return config.RedactURL(req.URL.String())
}

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
