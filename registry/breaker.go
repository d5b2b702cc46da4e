package registry

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// Circuit is the seam of the breaker stage: the state that decides whether
// an attempt may go and learns from its outcome. Each system's own
// gobreaker implements it; at BREAKER_SCOPE=fleet a breaker shared with
// the other pods of the service (module github.com/outbound-go/outbound/fleet)
// stands in for it through [WithFleetCircuit], without touching the other
// stages.
//
// Execute must run send at most once and return what send returned, or
// refuse with gobreaker.ErrOpenState or gobreaker.ErrTooManyRequests,
// unwrapped, having run nothing; [Judge] says how to count what send
// returned. State is read before every call (an open circuit refuses the
// call before the bulkhead) and by [Client.Status]; Counts by Status. All
// three are called from any goroutine, concurrently, and must be quick:
// they are on every call's path. A Circuit that also has a method
// FleetSync() observe.FleetSync has it shown in Status; one that is a
// [StateReporter] tells the observers of its own changes of state.
type Circuit interface {
	Execute(send func() (*http.Response, error)) (*http.Response, error)
	State() gobreaker.State
	Counts() gobreaker.Counts
}

// StateReporter is an optional interface of a [Circuit] given by
// [WithFleetCircuit] whose State is not only its local breaker's: a
// fleet's, which changes when another pod trips, when the open time
// passes, or when Redis fails. Without it the observers hear of the local
// breaker's changes only.
//
// The registry calls ReportStates once, while it builds the client, before
// any call. From then on the local breaker's changes go to the function
// ReportStates returns instead of to the observers (it runs while the
// local breaker holds its lock, so it must not call the local breaker),
// and the Circuit calls report for every change of its State, whatever
// caused it, once per change and in order (from is the state last
// reported; the first is closed). report runs the observers'
// ObserveBreaker synchronously: call it from no lock that Execute, State
// or Counts takes.
type StateReporter interface {
	ReportStates(report func(from, to gobreaker.State)) (local func(from, to gobreaker.State))
}

// Judge says how the breaker stage counts err, the error that the send
// function given to [Circuit.Execute] returned (and Execute passes on).
// The system's own breaker counts with it; a Circuit standing in for it
// counts with it too, so that both agree. Judge does not allocate.
func Judge(err error) observe.Verdict {
	switch {
	case err == nil:
		return observe.VerdictSuccess
	case err == errFailedStatus:
		return observe.VerdictFailure
	}
	// send returns attemptError unwrapped; a type assertion costs no
	// allocation on every attempt, unlike errors.As.
	if ae, ok := err.(*attemptError); ok && !ae.excluded {
		return observe.VerdictFailure
	}
	return observe.VerdictExcluded
}

// WithFleetCircuit installs the breaker of a fleet: wrap is called once
// per system whose BREAKER_SCOPE is fleet, while the registry is built,
// with the system's settings and its own (local) breaker, and returns the
// Circuit the system uses instead; an error fails the build. Systems at
// scope local keep their own breaker. A registry with a system at scope
// fleet and no (or a nil) wrap refuses to build. Services do not call it:
// (*fleet.Fleet).Option returns it.
func WithFleetCircuit(wrap func(system string, settings config.Client, local Circuit) (Circuit, error)) Option {
	return optionFunc(func(opts *options) { opts.fleet = wrap })
}

// fleetCircuit returns the circuit of l, a system at scope fleet, from the
// fleet option.
func (o *options) fleetCircuit(l config.Loaded, local Circuit) (Circuit, error) {
	if o.fleet == nil {
		return nil, fmt.Errorf("%s_BREAKER_SCOPE=fleet, but the registry has no fleet: build it with the option of github.com/outbound-go/outbound/fleet ((*fleet.Fleet).Option())", l.Prefix)
	}
	cb, err := o.fleet(l.Name, l.Client, local)
	if err == nil && cb == nil {
		err = errors.New("the fleet gave no breaker")
	}
	return cb, err
}

// pass is the breaker stage of attempt n: the circuit lets it through to
// the send stage, or refuses it with no I/O (op observe.OpBreaker). The circuit
// counts transport errors, attempt timeouts and policy.UpstreamFailure
// statuses as failures, every other response as a success, and excludes
// the caller's cancellation, requests refused before any I/O and attempts
// the caller's budget left no fair chance. last says no retry can follow:
// observers see a failed last attempt as gave_up rather than retry.
func (c *Client) pass(req *http.Request, n int, last bool) (*http.Response, observe.Op, error) {
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
func (c *Client) through(req *http.Request) (*http.Response, observe.Op, error) {
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
	var op observe.Op
	switch {
	case err == nil:
	case err == errFailedStatus:
		err = nil
	case errors.Is(err, gobreaker.ErrOpenState):
		resp, err, op = nil, &Error{System: c.name, Op: observe.OpBreaker, Err: errOpenState}, observe.OpBreaker
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		resp, err, op = nil, &Error{System: c.name, Op: observe.OpBreaker, Err: errProbesBusy}, observe.OpBreaker
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
func excluded(op observe.Op, avail time.Duration) bool {
	switch op {
	case observe.OpCanceled, observe.OpRequest:
		return true
	case observe.OpBudgetTimeout:
		return avail >= 0 && avail < minFairAttempt
	}
	return false
}

// attemptError carries a failed attempt's error through the circuit with
// its op, and whether the circuit must exclude it (neither a success nor a
// failure: the caller's cancellation or spent budget).
type attemptError struct {
	op       observe.Op
	excluded bool
	err      error
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// errFailedStatus marks an attempt that got a response the breaker counts
// as a failure. The response travels with it.
var errFailedStatus = errors.New("failed status")

// localChanged is the hook of the system's own breaker: its changes go to
// the observers, or to the fleet's circuit when it reports the states
// ([StateReporter]).
func (c *Client) localChanged(from, to gobreaker.State) {
	if c.toCircuit != nil {
		c.toCircuit(from, to)
		return
	}
	c.breakerChanged(from, to)
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
		IsExcluded:   func(err error) bool { return err != nil && Judge(err) == observe.VerdictExcluded },
	})
}

func breakerState(s gobreaker.State) observe.BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return observe.BreakerOpen
	case gobreaker.StateHalfOpen:
		return observe.BreakerHalfOpen
	}
	return observe.BreakerClosed
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
