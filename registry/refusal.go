package registry

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/outbound-go/outbound/internal/refusal"
	"github.com/outbound-go/outbound/observe"
)

// This file is how HTTPClient says "refused" to an SDK: a response, not
// an error.
//
// Generated SDKs (stripe-go, openai-go and the like) take any error of
// their *http.Client for a network failure and retry it with their own
// backoff: an open breaker that fails in microseconds would cost seconds
// per SDK call, and each retry would be refused again. Every such SDK
// stops at once on a 503 whose headers say not to retry. So HTTPClient
// answers a refusal (the ops whose observe.Op.Reason is set: an open or
// forced-open breaker, a full bulkhead, a rate limit, a budget spent
// before or during the call) with that response, made here; [Client.Do]
// still returns the typed [*Error], and the observers see the refusal as
// such, never as a 503. internal/refusal documents the response.

// RefusedHeader marks a response that outbound made up for a call it
// refused before sending anything: its value is the reason
// ("breaker-open", "forced-open", "bulkhead-full", "rate-limited",
// "budget-spent"), and X-Outbound-System names the system. Both are
// removed from every upstream response (headers and trailers, on Do and
// HTTPClient alike), so they cannot be forged.
const RefusedHeader = refusal.Header

const refusedSystemHeader = refusal.SystemHeader

// refusal is HTTPClient's answer to a call refused with e: Retry-After
// is BREAKER_OPEN_TIMEOUT in seconds for the breaker, the time left of
// the operator's override for a forced open, 1 for the bulkhead and the
// rate limit, none for a spent budget (waiting gives no time back). A
// duration is rounded up to whole seconds.
func (c *Client) refusal(req *http.Request, e *Error, reason string) *http.Response {
	retryAfter := ""
	switch e.Op {
	case observe.OpBreaker:
		retryAfter = seconds(c.Config().BreakerOpenTimeout)
	case observe.OpForcedOpen:
		retryAfter = seconds(c.forceLeft())
	case observe.OpBulkhead, observe.OpRateLimit:
		retryAfter = "1"
	}
	return refusal.Response(req, refusal.Reason{System: c.name, Reason: reason, Message: e.Error(), RetryAfter: retryAfter})
}

// forceLeft is the time left of the override that forced the breaker
// open; BREAKER_OPEN_TIMEOUT when it ended a moment ago.
func (c *Client) forceLeft() time.Duration {
	if f := c.force.Status(); f != nil && f.State == observe.BreakerOpen {
		return time.Until(f.Until)
	}
	return c.Config().BreakerOpenTimeout
}

// seconds is d rounded up to whole seconds, at least 1, as Retry-After
// writes it.
func seconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// Refusal returns the error of a call that [Client.HTTPClient] refused
// and answered with a made-up 503 (see [RefusedHeader]), from that
// response's header, or nil for any other response. The error is an
// [*Error] naming the system and the stage, and matches what [Client.Do]
// would have returned: [ErrCircuitOpen], bulkhead.ErrFull,
// [ErrRateLimited], or capbudget.ErrExhausted (and
// context.DeadlineExceeded) for a budget spent before or during the call.
// Use it on the header an SDK keeps in its API error:
//
//	var apiErr *openai.Error
//	if errors.As(err, &apiErr) && errors.Is(registry.Refusal(apiErr.Response.Header), registry.ErrCircuitOpen) { ... }
func Refusal(h http.Header) error {
	op, ok := observe.OpOfReason(h.Get(RefusedHeader))
	if !ok {
		return nil
	}
	return &Error{System: h.Get(refusedSystemHeader), Op: op, Err: refusal.Cause(op)}
}

// GaveUpHeader marks a response that [Client.HTTPClient] made for a
// replayable call outbound retried and gave up on with an error rather
// than a status (a timeout of a phase, a transport error such as a reset
// or a refused connection, CALL_TIMEOUT after a retry): 504 Gateway
// Timeout for a timeout, 502 Bad Gateway otherwise, with X-Should-Retry and
// Stripe-Should-Retry "false" so that the SDK does not start over. Its
// value is the op of the last attempt ("read timeout", "connect"),
// X-Outbound-Attempts the attempts sent, X-Outbound-System the system,
// and the body the common error envelope (type "outbound_gave_up", code
// the op with "_" for spaces). Like [RefusedHeader] it is removed from
// every upstream response. [Client.Do] returns the [*Error] instead.
const GaveUpHeader = refusal.GaveUpHeader

// errGaveUp is the cause of the error [GaveUp] reads back: the error
// itself stayed in the registry (its observers and logs saw it).
var errGaveUp = errors.New("gave up after its retries")

// gaveUp is HTTPClient's answer to a replayable call that e ended after
// the retry stage gave up (see [GaveUpHeader]).
func (c *Client) gaveUp(req *http.Request, e *Error) *http.Response {
	return refusal.GaveUp(req, refusal.Ended{System: c.name, Op: e.Op, Attempts: e.Attempts, Message: e.Error()})
}

// GaveUp returns the error of a call that [Client.HTTPClient] gave up on
// after its retries and answered with a made-up 502 or 504 (see
// [GaveUpHeader]), from that response's header, or nil for any other
// response: an [*Error] naming the system, the op of the last attempt
// (a timeout matches context.DeadlineExceeded only for CALL_TIMEOUT, as
// from Do) and the attempts sent. Use it on the header an SDK keeps in its
// API error, as with [Refusal].
func GaveUp(h http.Header) error {
	op, ok := observe.OpOfName(h.Get(GaveUpHeader))
	if !ok {
		return nil
	}
	n, _ := strconv.Atoi(h.Get(refusal.AttemptsHeader))
	return &Error{System: h.Get(refusedSystemHeader), Op: op, Attempts: max(n, 0), Err: errGaveUp}
}
