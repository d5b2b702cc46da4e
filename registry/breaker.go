package registry

import (
	"errors"
	"net/http"
	"sync"
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
//
// A Circuit whose rule can change while it runs also has a method
// SetRule(ratio float64, minRequests int): it judges by them from now on,
// when a change of the settings file changes BREAKER_FAILURE_RATIO or
// BREAKER_MIN_REQUESTS; its state and counts stay. It is called between
// calls, never on a call's path. The fleet module's breaker has it; with
// one without it (a fleet module built before it) such a change needs a
// restart. It is not part of the interface so that such a service still
// builds.
//
// Deprecated: a fleet shares breakers as [SharedBreaker]s ([BreakerFleet]),
// in outbound's words; the fleet module of this release does. Circuit,
// [StateReporter], [Forcer] and the Circuit and Quota methods of [Fleet]
// stay so that a service that requires a fleet module of an earlier
// release still builds, and go in the release after this one.
type Circuit interface {
	Execute(send func() (*http.Response, error)) (*http.Response, error)
	State() gobreaker.State
	Counts() gobreaker.Counts
}

// ruleSetter is a [Circuit] whose rule can change while it runs: a
// fleet's, whose window its pods judge by the rule each brings.
type ruleSetter interface {
	SetRule(ratio float64, minRequests int)
}

// ruleSettable reports whether cb judges by a rule that can change while
// it runs: its own (a localCircuit's rule changes in place), or one it
// takes by SetRule.
func ruleSettable(cb Circuit) bool {
	if _, own := cb.(*localCircuit); own {
		return true
	}
	_, ok := cb.(ruleSetter)
	return ok
}

// setRule hands cfg's rule to cb when it takes one by SetRule.
func setRule(cb Circuit, cfg config.Client) {
	if rs, ok := cb.(ruleSetter); ok {
		rs.SetRule(cfg.BreakerFailureRatio, cfg.BreakerMinRequests)
	}
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
//
// Deprecated: a [SharedBreaker] reports to [FleetSystem.States], given at
// construction; see [Circuit].
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
// its local breaker and calls it as any [Circuit]. A change of its
// window, open timeout or probes while the service runs (retune) puts a
// new gobreaker in the old one's place, carrying its state over; calls
// in flight finish on the old one, whose outcomes and changes then count
// no more.
type localCircuit struct {
	cb       atomic.Pointer[gobreaker.CircuitBreaker[*http.Response]]
	last     atomic.Pointer[circuitState] // nil: closed, as a new breaker is
	name     string
	rule     *breaker.Rule
	onChange func(from, to gobreaker.State)

	mu  sync.Mutex    // held by retune
	cfg config.Client // the settings of cb; under mu
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
	lc := &localCircuit{name: name, rule: rule, onChange: onChange, cfg: cfg}
	var cb *gobreaker.CircuitBreaker[*http.Response]
	cb = breaker.New(name, cfg, rule, lc.hook(&cb, cfg.BreakerOpenTimeout))
	lc.cb.Store(cb)
	return lc
}

// hook is the hook of the gobreaker *cb, of open timeout timeout: while
// it is the circuit's, its changes are recorded and go to onChange; a
// breaker taken over from, or one still being built by retune, tells
// nothing.
func (lc *localCircuit) hook(cb **gobreaker.CircuitBreaker[*http.Response], timeout time.Duration) func(from, to gobreaker.State) {
	return func(from, to gobreaker.State) {
		if lc.cb.Load() != *cb {
			return
		}
		lc.record(to, time.Now(), timeout)
		lc.onChange(from, to)
	}
}

// record keeps to, the state changed to at now, for open.
func (lc *localCircuit) record(to gobreaker.State, now time.Time, timeout time.Duration) {
	s := &circuitState{state: to}
	if to == gobreaker.StateOpen {
		s.until = now.Add(timeout)
	}
	lc.last.Store(s)
}

func (lc *localCircuit) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	return lc.cb.Load().Execute(send)
}
func (lc *localCircuit) State() gobreaker.State   { return lc.cb.Load().State() }
func (lc *localCircuit) Counts() gobreaker.Counts { return lc.cb.Load().Counts() }

// retune makes cfg's window, open timeout and probes the breaker's from
// now on, when they differ from its own: a new gobreaker takes over,
// carrying the state over (breaker.Carried.TakeOver): closed with the window's
// counts, judged at once by the rule in force; open (or half-open) for
// cfg's open timeout from now. A change of state the takeover makes
// (counts the new rule trips on) goes to onChange as any other.
func (lc *localCircuit) retune(cfg config.Client) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if breaker.SameSettings(lc.cfg, cfg) {
		return
	}
	old := lc.cb.Load()
	was := breaker.Carried{State: old.State(), Counts: old.Counts()}
	var cb *gobreaker.CircuitBreaker[*http.Response]
	cb = was.TakeOver(lc.name, cfg, lc.rule, lc.hook(&cb, cfg.BreakerOpenTimeout))
	now := cb.State()
	if now == gobreaker.StateOpen {
		lc.record(now, time.Now(), cfg.BreakerOpenTimeout)
	} else {
		lc.record(now, time.Time{}, 0)
	}
	lc.cb.Store(cb)
	lc.cfg = cfg
	if now != was.State { // closed counts the rule trips on; half-open, open again
		lc.onChange(was.State, now)
	}
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
	case time.Until(s.until) > 0:
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
