package registry

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/observe"
)

// This file is how HTTPClient says "refused" to an SDK: a response, not
// an error.
//
// Generated SDKs (stripe-go, openai-go and the like) take any error of
// their *http.Client for a network failure and retry it with their own
// backoff: an open breaker that fails in microseconds cost 1.4 s per SDK
// call, and three refusals counted (issue 16). Every such SDK stops at
// once on a 503 whose headers say not to retry. So HTTPClient answers a
// refusal by the breaker, the bulkhead or the budget, and a call cut by the
// caller's budget (observe.OpBudgetTimeout: stripe-go slept 500 ms past a 300 ms
// budget before retrying it), with that response, made here; [Client.Do] still returns the typed [*Error], and
// the observers see the refusal as such (observe.OutcomeBreakerOpen,
// observe.OutcomeBulkheadFull, observe.OutcomeBudgetSpent), never as a 503.

// The headers of a refusal response.
const (
	// RefusedHeader marks a response that outbound made up for a call it
	// refused before sending anything; its value is the reason
	// ("breaker-open", "bulkhead-full", "budget-spent"). HTTPClient
	// removes it from the upstream's responses, so it cannot be forged.
	RefusedHeader = "X-Outbound-Refused"
	// RefusedSystemHeader names the system that refused the call.
	RefusedSystemHeader = "X-Outbound-System"
)

// The reasons of [RefusedHeader].
const (
	RefusedBreakerOpen  = "breaker-open"
	RefusedBulkheadFull = "bulkhead-full"
	RefusedBudgetSpent  = "budget-spent"
)

// refusedReason returns the reason a refusal response gives for e, or ""
// when e is not a refusal that HTTPClient answers with a response.
func refusedReason(e *Error) string {
	switch e.Op {
	case observe.OpBreaker:
		return RefusedBreakerOpen
	case observe.OpBulkhead:
		return RefusedBulkheadFull
	case observe.OpBudget, observe.OpBudgetTimeout:
		// Spent before the call, or during it: either way the caller's
		// deadline is at most the reserve away, and an SDK's retry (whose
		// sleep may ignore the context) could only overrun it.
		return RefusedBudgetSpent
	}
	return ""
}

// refusal is HTTPClient's answer to a refused call: 503 Service
// Unavailable with
//
//	X-Should-Retry: false        (openai-go and other Stainless SDKs)
//	Stripe-Should-Retry: false   (stripe-go)
//	X-Outbound-Refused: breaker-open | bulkhead-full | budget-spent
//	X-Outbound-System: <system>
//	Retry-After: BREAKER_OPEN_TIMEOUT in seconds (breaker), 1 (bulkhead),
//	             none (budget: waiting cannot give the caller time back)
//
// and a JSON body in the shape both SDK families parse into their API
// error: {"error":{"type":"outbound_refused","code":<reason>,"message":<e>}}.
func (c *Client) refusal(req *http.Request, e *Error, reason string) *http.Response {
	h := make(http.Header, 7)
	h["Content-Type"] = []string{"application/json"}
	h["X-Should-Retry"] = []string{"false"}
	h["Stripe-Should-Retry"] = []string{"false"}
	h[RefusedHeader] = []string{reason}
	h[RefusedSystemHeader] = []string{c.name}
	switch reason {
	case RefusedBreakerOpen:
		h["Retry-After"] = []string{strconv.FormatInt(int64((c.cfg.BreakerOpenTimeout+999_999_999)/1e9), 10)}
	case RefusedBulkheadFull:
		h["Retry-After"] = []string{"1"}
	}
	type apiError struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Error apiError `json:"error"`
	}{apiError{Type: "outbound_refused", Code: reason, Message: e.Error()}})
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	return &http.Response{
		Status:     "503 Service Unavailable",
		StatusCode: http.StatusServiceUnavailable,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
		Request:       req,
	}
}

// Refusal returns the error of a call that [Client.HTTPClient] refused and
// answered with a made-up 503 (see [RefusedHeader]), from that response's
// header, or nil for any other response. The error is an [*Error] naming
// the system and the stage, and matches the sentinel of what [Client.Do]
// would have returned: [ErrCircuitOpen], [bulkhead.ErrFull] or
// [capbudget.ErrExhausted] (and context.DeadlineExceeded) for a budget
// spent before or during the call.
// Use it on the header an SDK keeps in its API error:
//
//	var apiErr *openai.Error
//	if errors.As(err, &apiErr) && errors.Is(registry.Refusal(apiErr.Response.Header), registry.ErrCircuitOpen) { ... }
func Refusal(h http.Header) error {
	sys := h.Get(RefusedSystemHeader)
	switch h.Get(RefusedHeader) {
	case RefusedBreakerOpen:
		return &Error{System: sys, Op: observe.OpBreaker, Err: errOpenState}
	case RefusedBulkheadFull:
		return &Error{System: sys, Op: observe.OpBulkhead, Err: bulkhead.ErrFull}
	case RefusedBudgetSpent:
		return &Error{System: sys, Op: observe.OpBudget, Err: capbudget.ErrExhausted}
	}
	return nil
}
