package registry

import (
	"errors"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/sony/gobreaker/v2"
)

// circuit is the seam of the breaker stage: the state that decides whether
// an attempt may go and learns from its outcome. The system's own
// gobreaker implements it today; a fleet-shared state (a breaker whose
// window and state are merged across pods) can stand in for it without
// touching the other stages. Execute must run send at most once, and
// return gobreaker.ErrOpenState or gobreaker.ErrTooManyRequests, unwrapped,
// when it refuses.
type circuit interface {
	Execute(send func() (*http.Response, error)) (*http.Response, error)
	State() gobreaker.State
	Counts() gobreaker.Counts
}

// pass is the breaker stage of attempt n: the circuit lets it through to
// the send stage, or refuses it with no I/O (op OpBreaker). The circuit
// counts transport errors, attempt timeouts and policy.UpstreamFailure
// statuses as failures, every other response as a success, and excludes
// the caller's cancellation, requests refused before any I/O and attempts
// the caller's budget left no fair chance. last says no retry can follow:
// observers see a failed last attempt as gave_up rather than retry.
func (c *Client) pass(req *http.Request, n int, last bool) (*http.Response, Op, error) {
	var t0 time.Time
	if len(c.observers) > 0 {
		t0 = time.Now()
	}
	resp, op, err := c.through(req)
	c.observeAttempt(req, n, last, resp, op, err, t0)
	return resp, op, err
}

// through is pass without the observers: the hedge stage tells them
// once it knows which copy won.
func (c *Client) through(req *http.Request) (*http.Response, Op, error) {
	resp, err := c.cb.Execute(func() (*http.Response, error) {
		resp, op, avail, err := c.send(req)
		switch {
		case err != nil:
			// The op rides on the error: a success costs no more than
			// the closure.
			return nil, &attemptError{op: op, excluded: excluded(op, avail), err: err}
		case policy.UpstreamFailure(resp.StatusCode):
			return resp, errFailedStatus
		}
		return resp, nil
	})
	var op Op
	switch {
	case err == nil:
	case err == errFailedStatus:
		err = nil
	case errors.Is(err, gobreaker.ErrOpenState):
		resp, err, op = nil, &Error{System: c.name, Op: OpBreaker, Err: errOpenState}, OpBreaker
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		resp, err, op = nil, &Error{System: c.name, Op: OpBreaker, Err: errProbesBusy}, OpBreaker
	default:
		if ae, ok := err.(*attemptError); ok {
			op, err = ae.op, ae.err
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

// attemptError carries a failed attempt's error through the circuit with
// its op, and whether the circuit must exclude it (neither a success nor a
// failure: the caller's cancellation or spent budget).
type attemptError struct {
	op       Op
	excluded bool
	err      error
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// errFailedStatus marks an attempt that got a response the breaker counts
// as a failure. The response travels with it.
var errFailedStatus = errors.New("failed status")

func newBreaker(name string, c config.Client, onChange func(from, to gobreaker.State)) *gobreaker.CircuitBreaker[*http.Response] {
	minReq := uint32(c.BreakerMinRequests)
	ratio := c.BreakerFailureRatio
	return gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:         name,
		MaxRequests:  uint32(c.BreakerHalfOpenProbes),
		Interval:     c.BreakerWindow,
		BucketPeriod: c.BreakerWindow / 10,
		Timeout:      c.BreakerOpenTimeout,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			judged := n.TotalSuccesses + n.TotalFailures
			return judged >= minReq && float64(n.TotalFailures) >= ratio*float64(judged)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if onChange != nil {
				onChange(from, to)
			}
		},
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded: func(err error) bool {
			// pass returns attemptError unwrapped; a type assertion
			// costs no allocation on every attempt, unlike errors.As.
			ae, ok := err.(*attemptError)
			return ok && ae.excluded
		},
	})
}

func breakerState(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// breakerRefusal is the cause of a call the breaker refused. Its values
// are immutable (no exported field), so every call can share them.
type breakerRefusal struct{ state error }

// The causes of the breaker's refusals: open, or half-open with every
// probe taken.
var (
	errOpenState  = &breakerRefusal{gobreaker.ErrOpenState}
	errProbesBusy = &breakerRefusal{gobreaker.ErrTooManyRequests}
)

func (r *breakerRefusal) Error() string {
	if r == errProbesBusy {
		return "circuit half-open, every probe taken"
	}
	return "circuit open"
}

// Is makes the refusal match ErrCircuitOpen; Unwrap, gobreaker's error.
// Neither allocates.
func (r *breakerRefusal) Is(target error) bool { return target == ErrCircuitOpen }
func (r *breakerRefusal) Unwrap() error        { return r.state }
