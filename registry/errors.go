package registry

import (
	"context"
	"errors"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/ratelimit"
	"github.com/outbound-go/outbound/observe"
)

var (
	// ErrUnknownSystem is returned by [Registry.Client] for a name that
	// was not declared.
	ErrUnknownSystem = errors.New("outbound: unknown system")
	// ErrCircuitOpen matches calls rejected by an open (or saturated
	// half-open) circuit breaker. It wraps gobreaker's ErrOpenState or
	// ErrTooManyRequests.
	ErrCircuitOpen = breaker.ErrOpen
	// ErrClosed matches calls made after [Registry.Close].
	ErrClosed = errors.New("outbound: registry closed")
	// ErrRetryThrottled matches a call that stopped retrying because the
	// system's retry throttle had no token (RETRY_BUDGET_RATIO,
	// RETRY_BUDGET_MIN_PER_SEC): retries are bounded by a fraction of
	// recent calls.
	ErrRetryThrottled = errors.New("outbound: retries throttled")
	// ErrPathEscapesBase matches a relative request URL whose ".."
	// segments would climb above BASE_URL's path; nothing is sent.
	ErrPathEscapesBase = errors.New("outbound: relative path climbs above BASE_URL")
	// ErrOtherOrigin matches a request whose absolute URL is not
	// BASE_URL's origin (scheme, host and port): a system is one origin,
	// so that its credentials, X-Time-Budget, breaker and bulkhead are
	// never spent on another host. Nothing is sent; the error names both
	// origins. Use a relative URL, or the system that owns the other
	// host. Redirects are not requests of the caller: they follow
	// FOLLOW_REDIRECTS.
	ErrOtherOrigin = errors.New("outbound: request origin is not BASE_URL's")
	// ErrRateLimited matches a request refused by the system's rate limit
	// (RATE_LIMIT): no token within RATE_MAX_WAIT and the caller's budget,
	// or the upstream asked the system to pause. Nothing was sent; the
	// breaker does not count it.
	ErrRateLimited = ratelimit.ErrLimited
	// ErrInjected matches the errors of attempts that fault injection
	// made fail (drills, OUTBOUND_FAULTS=on): a delay cut by READ_TIMEOUT
	// or by the call's deadline. An injected abort is a response, not an
	// error: its header X-Outbound-Fault says "abort".
	ErrInjected = errors.New("outbound: injected fault")
)

// originError is the cause of a request refused with [ErrOtherOrigin]:
// both origins, as scheme://host:port, redacted.
type originError struct{ got, base string }

func (e *originError) Error() string        { return "origin " + e.got + " is not BASE_URL's " + e.base }
func (e *originError) Is(target error) bool { return target == ErrOtherOrigin }

// Error is the error of a call that did not return a response. It names
// the system and the stage that failed, and unwraps to the cause: the
// package sentinels, bulkhead.ErrFull, capbudget.ErrExhausted, the
// transport's error, context errors.
type Error struct {
	System string
	Op     observe.Op
	// inURLError: net/http's *url.Error wraps the Error and names Method
	// and URL. It sits in Op's padding so that an Error takes 96 bytes,
	// not 112: a refused call's one allocation.
	inURLError bool
	Method     string // empty for fast failures
	URL        string // redacted; empty for fast failures
	Attempts   int    // attempts sent; 0 when nothing was sent
	// StatusCode is the last temporary status seen when the call gave up
	// on a status it could not retry in time (e.g. 429 with a Retry-After
	// past the deadline); 0 otherwise.
	StatusCode int
	// RetryAfter is the upstream's Retry-After hint on that status, when
	// the call gave up because waiting for it would pass the deadline; 0
	// when there was none.
	RetryAfter time.Duration
	Err        error
}

// Error reads as one sentence: the system, the request (unless net/http's
// *url.Error around it names it already), the stage, and the cause, each
// said once (cause.go):
//
//	outbound payments: bulkhead full
//	outbound payments: GET "https://pay.example/v1/x": call timeout after 3 attempts (last status 503): ...
func (e *Error) Error() string {
	s := causeSentence{System: e.System, Op: e.Op, Attempts: e.Attempts, StatusCode: e.StatusCode,
		RetryAfter: e.RetryAfter, Cause: e.Err,
		// A sentinel that names its stage ("registry closed", "time
		// budget exhausted") stands alone.
		Alone: e.Err == ErrClosed || e.Err == capbudget.ErrExhausted || e.Err == errReadAfterClose}
	if !e.inURLError {
		s.Method, s.URL = e.Method, e.URL
	}
	return s.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes a call that ran out of time, or was refused because the
// caller's budget was already spent, match context.DeadlineExceeded, as
// http.Client's Timeout errors do, whatever the cause that fired
// (capbudget.ErrCallTimeout or capbudget.ErrExhausted).
func (e *Error) Is(target error) bool {
	return target == context.DeadlineExceeded && e.Op.Deadline()
}

// ErrorType is the op's name ("connect timeout"): the low-cardinality
// error.type of OpenTelemetry's conventions.
func (e *Error) ErrorType() string { return e.Op.String() }

// Timeout reports whether the call failed on a timeout of any phase, as
// net.Error does.
func (e *Error) Timeout() bool { return e.Op.Timeout() }
