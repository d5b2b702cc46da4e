// Package capbudget does the deadline arithmetic for outbound calls: an
// outbound call must never outlive the time budget its caller has left, and
// that budget travels between services in the X-Time-Budget header.
//
// # The formula
//
// For a call made on behalf of a caller context ctx, with a per-call timeout
// callTimeout and a reserve (time kept back so the caller can still handle
// the failure, log and answer):
//
//	outbound deadline = min(now + callTimeout, callerDeadline - reserve)
//
// with these rules:
//
//   - If ctx has no deadline, only the per-call timeout applies.
//   - If callTimeout <= 0 there is no per-call bound and only the caller's
//     budget applies.
//   - If callerDeadline - now - reserve <= 0 the budget is already spent: the
//     returned context is done at once, its cause is [ErrExhausted] and no
//     timer is started.
//   - The result is never later than the caller's deadline: a sooner caller
//     deadline always wins, as with net/http's per-request cancellation.
//
// The capped context records why it ends: [context.Cause] reports
// [ErrExhausted] when the deadline came from the caller's budget and
// [ErrCallTimeout] when it came from the per-call timeout, while ctx.Err()
// is [context.DeadlineExceeded] in both cases, as usual.
//
// [Check] asks the same question without building a context and without
// allocating, so it can guard the hot path of every outbound call.
//
// # Propagation
//
// [SetHeader] writes the whole milliseconds left before a context's deadline
// into the [Header] of an outbound request; [Middleware] reads it on the
// receiving side and bounds the inbound request's context by it, so a chain
// of services shares one budget. [ParseHeader] accepts only a plain
// non-negative decimal integer of milliseconds no larger than [MaxBudget].
// A budget of 0 means the caller has already given up, and Middleware
// answers 504 Gateway Timeout without running the handler; a malformed
// header is ignored. Downstream calls made from the handler then pass the
// bounded request context to [Cap], which keeps the reserve back again at
// every hop.
//
// # Example
//
//	func (c *Client) Get(ctx context.Context, url string) (*http.Response, error) {
//		if err := capbudget.Check(ctx, capbudget.DefaultReserve); err != nil {
//			return nil, err // fail fast: no time left for this call
//		}
//		ctx, cancel := capbudget.Cap(ctx, 2*time.Second)
//		defer cancel()
//		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
//		if err != nil {
//			return nil, err
//		}
//		capbudget.SetHeader(ctx, req.Header)
//		resp, err := c.http.Do(req)
//		if err != nil && errors.Is(context.Cause(ctx), capbudget.ErrExhausted) {
//			return nil, capbudget.ErrExhausted // the caller's budget ran out
//		}
//		return resp, err
//	}
//
// (A real client would keep ctx alive until the response body is read.)
package capbudget

import (
	"errors"
	"time"
)

// ErrExhausted reports that the caller's time budget is spent: the caller's
// remaining time minus the reserve is <= 0, or a deadline that
// [Cap]/[CapWith] derived from the caller's budget has fired. It is the
// [context.Cause] of such contexts and the value [Check] returns; it is
// returned as is, never wrapped, so both == and [errors.Is] work.
var ErrExhausted = errors.New("capbudget: time budget exhausted")

// ErrCallTimeout is the [context.Cause] of a context returned by
// [Cap]/[CapWith] whose deadline fired because of the per-call timeout
// rather than the caller's budget.
var ErrCallTimeout = errors.New("capbudget: call timeout")

// DefaultReserve is the time [Cap] keeps back from the caller's deadline so
// that the caller still has time to handle a failed outbound call.
const DefaultReserve = 100 * time.Millisecond

// Header is the HTTP header that carries a time budget between services:
// the whole number of milliseconds the receiver may spend, as a plain
// non-negative decimal integer (for example "X-Time-Budget: 250"). It is in
// canonical MIME form, so it can index an [net/http.Header] directly.
const Header = "X-Time-Budget"

// MaxBudget is the largest budget [ParseHeader] accepts (one hour). Larger
// values are rejected rather than clamped, and [SetHeader] never writes a
// value above it.
const MaxBudget = time.Hour

// maxBudgetMillis is MaxBudget in whole milliseconds.
const maxBudgetMillis = int64(MaxBudget / time.Millisecond)
