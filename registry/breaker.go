package registry

import (
	"errors"
	"net/http"

	"github.com/outbound-go/outbound/config"
	"github.com/sony/gobreaker/v2"
)

// excludedError marks an attempt outcome the breaker neither counts as a
// success nor as a failure: the caller's cancellation or spent budget.
type excludedError struct{ err error }

func (e *excludedError) Error() string { return e.err.Error() }
func (e *excludedError) Unwrap() error { return e.err }

// errFailedStatus marks an attempt that got a response the breaker counts
// as a failure (408, 429, 5xx). The response travels with it.
var errFailedStatus = errors.New("failed status")

// breakerFailureStatus reports whether a status counts as a failure of the
// upstream: 408, 429 and every 5xx.
func breakerFailureStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

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
			// attempt returns excludedError unwrapped; a type assertion
			// costs no allocation on every attempt, unlike errors.As.
			_, ok := err.(*excludedError)
			return ok
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

// Unwrap makes the refusal match ErrCircuitOpen and gobreaker's error.
func (r *breakerRefusal) Unwrap() []error { return []error{ErrCircuitOpen, r.state} }
