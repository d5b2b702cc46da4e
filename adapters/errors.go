package adapters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// ErrNotFound matches a [*StatusError] with status 404, so an adapter can
// write errors.Is(err, adapters.ErrNotFound) and map it to its domain's
// "no such thing".
var ErrNotFound = errors.New("adapters: not found")

// StatusError is a response with a status outside 2xx. Use errors.As to
// read it; errors.Is(err, [ErrNotFound]) holds for a 404.
type StatusError struct {
	System     string // the system's name
	Method     string
	Path       string // the escaped request path, without the query
	StatusCode int
	// Body is the start of the response body, at most 256 bytes, for
	// logs and error messages.
	Body []byte
	// RetryAfter is the upstream's Retry-After hint (delay-seconds or
	// HTTP-date, relative to when the response arrived), valid when
	// HasRetryAfter is true. A date in the past gives 0.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Err is the registry's error when the registry gave up on this
	// status before the deadline (no response reached the adapter); nil
	// otherwise.
	Err error
}

func newStatusError(system, method, path string, resp *http.Response) *StatusError {
	e := &StatusError{System: system, Method: method, Path: path, StatusCode: resp.StatusCode}
	e.Body, _ = io.ReadAll(io.LimitReader(resp.Body, statusBodyMax))
	e.RetryAfter, e.HasRetryAfter = policy.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %s %s: %d %s", e.System, e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if e.HasRetryAfter {
		s += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	if len(e.Body) > 0 {
		s += ": " + strconv.Quote(string(e.Body))
	}
	if e.Err != nil {
		s += ": no time left to retry"
	}
	return s
}

// Unwrap returns the registry's error, if any.
func (e *StatusError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrNotFound] and the status is 404.
func (e *StatusError) Is(target error) bool {
	return target == ErrNotFound && e.StatusCode == http.StatusNotFound
}

// Temporary reports whether the status says the upstream is unavailable
// for now rather than that the request is wrong: 408, 429, 500, 502, 503
// and 504, the statuses the registry retries. Other 5xx (501, 505, ...)
// are answers a retry or a fallback cannot mend: the request needs a fix.
func (e *StatusError) Temporary() bool {
	return policy.TemporaryStatus(e.StatusCode)
}

// readError is a failure while reading a 2xx response's body: the
// connection broke or the call's deadline fired mid-body.
type readError struct {
	where string
	err   error
}

func (e *readError) Error() string { return e.where + ": read response: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// Degradable reports whether err says the system is unavailable right now,
// so that the caller may serve a cached or default value, or degrade the
// feature, instead of failing:
//
//   - the breaker is open (registry.ErrCircuitOpen), the bulkhead is full
//     (bulkhead.ErrFull), or the caller's budget is spent
//     (capbudget.ErrExhausted): the call was refused with no I/O;
//   - any timeout ([registry.Error.Timeout]), a refused or broken
//     connection, or retries that ran out before the deadline;
//   - a [*StatusError] with a temporary status: 408, 429, 500, 502, 503, 504.
//
// It is false for nil, for the caller's own cancellation (nobody is
// waiting for a fallback), for a registry closed at shutdown, for other
// 4xx statuses (the request is wrong: a fallback would hide a bug), and
// for answers that are not the JSON expected.
func Degradable(err error) bool {
	if err == nil {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Temporary()
	}
	var re *registry.Error
	if errors.As(err, &re) {
		switch re.Op {
		case observe.OpCanceled, observe.OpClosed:
			return false
		}
		return true // breaker, bulkhead, budget, timeouts, connect, transport, status
	}
	// Errors that did not come through a registry client, or came from
	// reading the body after the registry handed the response over.
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, registry.ErrClosed):
		return false
	case errors.Is(err, registry.ErrCircuitOpen), errors.Is(err, bulkhead.ErrFull),
		errors.Is(err, capbudget.ErrExhausted), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var rerr *readError
	return errors.As(err, &rerr)
}
