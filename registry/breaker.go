package registry

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// Circuit is the seam of the breaker stage: the state that decides whether
// an attempt may go and learns from its outcome. Each system's own
// gobreaker implements it; at BREAKER_SCOPE=fleet a breaker shared with
// the other pods of the service (module github.com/outbound-go/outbound/fleet)
// stands in for it through [WithFleet], without touching the other
// stages.
//
// Execute must run send at most once and return what send returned, or
// refuse with gobreaker.ErrOpenState or gobreaker.ErrTooManyRequests,
// unwrapped, having run nothing; [FleetSystem.Judge] says how to count what send
// returned. A fleet's State is read before every call (an open circuit
// refuses the call before the bulkhead; the pod's own breaker answers
// from the state its hook last recorded, see localCircuit) and by
// [Client.Status]; Counts by Status. All
// three are called from any goroutine, concurrently, and must be quick:
// they are on every call's path. A Circuit that also has a method
// FleetSync() observe.FleetSync has it shown in Status; one that is a
// [StateReporter] tells the observers of its own changes of state.
type Circuit interface {
	Execute(send func() (*http.Response, error)) (*http.Response, error)
	State() gobreaker.State
	Counts() gobreaker.Counts
}

// StateReporter is an optional interface of a [Circuit] given by a
// [Fleet] whose State is not only its local breaker's: a
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

// breakerStage passes each attempt through the system's Circuit (its own
// gobreaker, or its fleet's), which lets it through to the next stage or
// refuses it with no I/O (op OpBreaker). The circuit counts transport
// errors, attempt timeouts and policy.UpstreamFailure statuses as
// failures, every other response as a success, and excludes the caller's
// cancellation, requests refused before any I/O and attempts the
// caller's budget left no fair chance. An operator's override
// ([Client.Force]) refuses every attempt, or lets every one through
// unjudged. It is always in the chain.
type breakerStage struct {
	c    *Client
	cb   Circuit // the policy's: the system's, or a route's own
	next attemptStage
}

func (s *breakerStage) send(a *attempt) {
	switch s.c.force.State() { // an operator's override (Client.Force)
	case observe.BreakerOpen:
		a.op, a.err = observe.OpForcedOpen, breaker.ForcedOpen
		return
	case observe.BreakerClosed:
		s.next.send(a)
		return
	}
	if dl, ok := a.req.Context().Deadline(); ok {
		a.avail = time.Until(dl)
	}
	_, err := s.cb.Execute(func() (*http.Response, error) {
		s.next.send(a)
		switch {
		case a.err != nil:
			// The op rides on the error: a success costs no more than
			// the closure.
			return nil, &breaker.Attempt{Op: a.op, Excluded: breaker.Excluded(a.op, a.avail), Err: a.err}
		case policy.UpstreamFailure(a.resp.StatusCode):
			return a.resp, breaker.ErrFailedStatus
		}
		return a.resp, nil
	})
	switch {
	case err == nil, err == breaker.ErrFailedStatus:
	case errors.Is(err, gobreaker.ErrOpenState):
		a.resp, a.op, a.err = nil, observe.OpBreaker, breaker.Open
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		a.resp, a.op, a.err = nil, observe.OpBreaker, breaker.ProbesBusy
	}
}

// breakerRefuses reports whether the breaker stage would refuse an
// attempt of policy p now, with no I/O: an operator forced it open, or
// p's circuit is open.
func (c *Client) breakerRefuses(p *route) bool {
	switch c.force.State() {
	case observe.BreakerOpen:
		return true
	case observe.BreakerClosed:
		return false
	}
	return circuitOpen(p.cb)
}

// circuitOpen reports whether cb's State is open now. A [localCircuit]
// answers without its State (gobreaker's lock and a read of the clock,
// most of a refused call's time) unless its open time has passed.
func circuitOpen(cb Circuit) bool {
	if lc, ok := cb.(*localCircuit); ok {
		return lc.open()
	}
	return cb.State() == gobreaker.StateOpen
}

// localCircuit is a breaker of this pod's own (the system's, or a route's
// at BREAKER=own): its gobreaker, and the state it last changed to, which
// its hook keeps under gobreaker's lock. A fleet's circuit wraps one as
// its local breaker and calls it as any [Circuit].
type localCircuit struct {
	*gobreaker.CircuitBreaker[*http.Response]
	timeout time.Duration                // BREAKER_OPEN_TIMEOUT, fixed for the breaker's life
	last    atomic.Pointer[circuitState] // nil: closed, as a new breaker is
}

// circuitState is a state a localCircuit changed to, and for open the end
// of its open time: BREAKER_OPEN_TIMEOUT after the change, read a moment
// after gobreaker's own reading, so never sooner than gobreaker's end.
type circuitState struct {
	state gobreaker.State
	until time.Time
}

// newLocalCircuit builds the breaker of settings cfg (breaker.New) whose
// changes of state go to onChange.
func newLocalCircuit(name string, cfg config.Client, rule *breaker.Rule, onChange func(from, to gobreaker.State)) *localCircuit {
	lc := &localCircuit{timeout: cfg.BreakerOpenTimeout}
	lc.CircuitBreaker = breaker.New(name, cfg, rule, func(from, to gobreaker.State) {
		s := &circuitState{state: to}
		if to == gobreaker.StateOpen {
			s.until = time.Now().Add(lc.timeout)
		}
		lc.last.Store(s)
		onChange(from, to)
	})
	return lc
}

// open reports whether State is open now. A gobreaker leaves closed or
// half-open only on an attempt's outcome, which runs the hook, never
// because time passed, so a state last changed to that is not open
// answers at once. An open one answers at once too until its open time
// ends (time.Until of a monotonic reading reads one clock, with no
// lock); after that State decides, and turns the breaker half-open.
func (lc *localCircuit) open() bool {
	s := lc.last.Load()
	switch {
	case s == nil || s.state != gobreaker.StateOpen:
		return false
	case lc.timeout > 0 && time.Until(s.until) > 0:
		return true
	}
	return lc.State() == gobreaker.StateOpen
}

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

// breakerChanged tells the observers of a change of the breaker's state
// as Status shows it.
func (c *Client) breakerChanged(from, to gobreaker.State) {
	for _, o := range c.observers {
		o.ObserveBreaker(c.name, breaker.State(from), breaker.State(to))
	}
}
