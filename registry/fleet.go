package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/ratelimit"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// Fleet is the seam of module github.com/outbound-go/outbound/fleet: it
// gives each system whose BREAKER_SCOPE is fleet the breaker it shares
// with the other pods of the service, and each whose RATE_SCOPE is fleet
// its share of the fleet's quota. The registry asks it once per such
// system while it builds the client, with what it tells of the system
// ([FleetSystem]: its name, settings, the registry's logger and where to
// report) and the system's own (local) breaker or quota, which the
// fleet's wraps; an error fails the build. Services do not implement it:
// (*fleet.Fleet).Option gives it.
//
// A fleet that is a [BreakerFleet] is asked for [SharedBreaker]s, never
// for a Circuit; one that is a [QuotaFleet] for [SharedQuota]s, never for
// a Quota. The fleet module of this release is both, and its Circuit and
// Quota only refuse. The two methods are the seam of fleet modules of an
// earlier release, kept so that a service requiring one still builds
// (Deprecated, as [Circuit]: in the release after this one Fleet asks for
// SharedBreaker and SharedQuota only).
type Fleet interface {
	Circuit(sys FleetSystem, local Circuit) (Circuit, error)
	Quota(sys FleetSystem, local Quota) (Quota, error)
}

// FleetSystem is what the registry tells its [Fleet] of a system when it
// asks for the system's circuit or quota, in that one call.
type FleetSystem struct {
	// Name is the system's name; a route with a breaker or a quota of its
	// own is "system.route".
	Name string
	// Settings are the system's (or the route's) settings as loaded.
	Settings config.Client
	// Logger is the registry's logger ([WithLogger]); nil when it has
	// none. A fleet without a logger of its own logs through it (its
	// Redis lost and back), so that a service wires one logger.
	Logger *slog.Logger
	// Judge says how the breaker stage counts err, the error that the
	// send function given to [Circuit.Execute] returned (and Execute
	// passes on). The system's own breaker counts with it; a Circuit
	// standing in for it counts with it too, so that both agree. It does
	// not allocate.
	Judge func(err error) observe.Verdict
	// States and Forces are given to a [BreakerFleet] only, when it is
	// asked for a SharedBreaker. The [SharedBreaker] calls States for
	// every change of its state, whatever caused it, once per change and
	// in order (from is the state last reported; the first is closed);
	// it runs the observers synchronously, so call it from no lock that
	// Execute, Breaker or Forced takes. Forces (nil for a route's
	// breaker) is called, once per change, with an override learned from
	// another pod (not this pod's own Force): the observers hear of it.
	States func(from, to observe.BreakerState)
	Forces func(state observe.BreakerState, until time.Time)
	// Pauses is given to a [QuotaFleet] only, for a system's quota (nil
	// for a route's): the [SharedQuota] calls it, once per pause, with a
	// pause learned from another pod's upstream; the observers hear of it.
	Pauses func(until time.Time)
}

// WithFleet installs the fleet f. Systems at scope local keep their own
// breaker and quota; a registry with a system at scope fleet and no (or
// a nil) fleet refuses to build.
func WithFleet(f Fleet) Option {
	return optionFunc(func(opts *options) { opts.fleet = f })
}

// Quota is the seam of the rate stage: the quota of requests sent to a
// system (RATE_LIMIT). Every request that leaves for the upstream takes a
// token: first attempts, retries, hedges and half-open probes. Each
// system at RATE_SCOPE=local has its own token bucket; at scope fleet a
// [Fleet] gives one that spends from this pod's share of the fleet's
// quota, granted in the background: a call never waits on Redis.
//
// Wait takes a token, waiting at most maxWait (RATE_MAX_WAIT) and never
// past ctx's deadline; it returns nil, an error matching
// [ErrRateLimited] when no token comes in time, or ctx's error. Pause
// stops every request until until (the upstream said so); a shorter
// pause changes nothing. Status describes the quota. Wait is on the path
// of every attempt and must not allocate when a token is at hand.
// ReportPauses, called once before any call, gives the hook to call with
// a pause learned from elsewhere (another pod's upstream): the observers
// hear of it, once per pause.
//
// A quota whose rate can change while it runs also has a method
// SetRate(r config.Rate): it makes r (limited) the quota's rate from now
// on, when a change of the settings file changes RATE_LIMIT or
// RATE_BURST; the tokens at hand carry over (at most the new burst), and
// a fleet's quota shares the new limit from its next sync on. It is
// called between calls, never on a call's path. Every quota of this
// module has it, and so does the fleet module's; with a quota without it
// (a fleet module built before it, in a service that requires the two
// at different versions) such a change needs a restart. It is not part of
// the interface so that such a service still builds.
//
// Deprecated: a fleet shares quotas as [SharedQuota]s ([QuotaFleet]),
// whose pauses go to [FleetSystem.Pauses]; see [Circuit].
type Quota interface {
	Wait(ctx context.Context, maxWait time.Duration) error
	Pause(until time.Time)
	Status() observe.RateStatus
	ReportPauses(report func(until time.Time))
}

// rateSetter is a [Quota] whose rate can change while it runs.
type rateSetter interface{ SetRate(r config.Rate) }

// settable reports whether q's rate can change while it runs: q is nil
// (a change makes a new one) or has SetRate.
func settable(q Quota) bool {
	_, ok := q.(rateSetter)
	return q == nil || ok
}

// SharedQuota is the quota a [QuotaFleet] shares between the pods of the
// service for a system (or a route with a rate of its own) at
// RATE_SCOPE=fleet: the pod's share of the fleet's limit, granted in the
// background. Wait, Pause and Status are [Quota]'s; SetRate makes r the
// quota's rate from now on (a change of the settings file), the tokens at
// hand carrying over, and is called between calls. A pause learned from
// another pod goes to the FleetSystem's Pauses, not to a hook set later.
type SharedQuota interface {
	Wait(ctx context.Context, maxWait time.Duration) error
	Pause(until time.Time)
	Status() observe.RateStatus
	SetRate(r config.Rate)
}

// QuotaFleet is a [Fleet] that shares its quotas as [SharedQuota]s: the
// registry asks it for SharedQuota, never for Quota, and fills sys.Pauses
// before the call. local is the pod's own quota of the system's rate.
type QuotaFleet interface {
	Fleet
	SharedQuota(sys FleetSystem, local SharedQuota) (SharedQuota, error)
}

// fleetQuota returns the quota of l, a system or a route at
// RATE_SCOPE=fleet, that spends from local; pauses (nil: none) is told of
// the pauses it learns from other pods. A fleet of either seam is asked:
// a [QuotaFleet] for a SharedQuota, any other for a [Quota].
func (o *options) fleetQuota(l config.Loaded, local *ratelimit.Local, pauses func(until time.Time)) (Quota, error) {
	if o.fleet == nil {
		return nil, noFleet(l.Prefix + "_RATE_SCOPE")
	}
	sys := o.fleetSystem(l)
	if qf, ok := o.fleet.(QuotaFleet); ok {
		sys.Pauses = pauses
		sq, err := qf.SharedQuota(sys, local)
		if err == nil && sq == nil {
			err = errors.New("the fleet gave no quota")
		}
		if err != nil {
			return nil, err
		}
		return sharedQuota{sq}, nil
	}
	q, err := o.fleet.Quota(sys, local)
	if err == nil && q == nil {
		err = errors.New("the fleet gave no quota")
	}
	if err != nil {
		return nil, err
	}
	if pauses != nil {
		q.ReportPauses(pauses)
	}
	return q, nil
}

// sharedQuota is a [SharedQuota] in the rate stage's place, as a [Quota]
// whose pauses learned elsewhere go to the FleetSystem's Pauses.
type sharedQuota struct{ SharedQuota }

func (sharedQuota) ReportPauses(func(until time.Time)) {} // FleetSystem.Pauses has it

// fleetSystem is what the fleet is told of l.
func (o *options) fleetSystem(l config.Loaded) FleetSystem {
	return FleetSystem{Name: l.Name, Settings: l.Client, Logger: o.logger, Judge: breaker.Judge}
}

func noFleet(variable string) error {
	return fmt.Errorf("%s=fleet, but the registry has no fleet: build it with the option of github.com/outbound-go/outbound/fleet ((*fleet.Fleet).Option())", variable)
}

// SharedBreaker is the breaker a [BreakerFleet] shares between the pods
// of the service for a system (or a route with a breaker of its own) at
// BREAKER_SCOPE=fleet, in outbound's words. It wraps the pod's own
// breaker (a [LocalBreaker]) and stands in for it in the breaker stage.
// A fleet that gives SharedBreakers needs none of [Circuit]'s gobreaker
// types, [StateReporter] or [Forcer], and no hook called before the
// first call: what it tells the registry goes to the functions of the
// [FleetSystem] it was given (States, Forces).
//
// Execute runs send at most once and returns what send returned, or
// refuses, having run nothing, with an error that matches
// [ErrCircuitOpen] (while Breaker says half-open: every probe is taken);
// [FleetSystem.Judge] says how to count what send returned. Breaker
// returns the state now and the counts of the window; it is read before
// every call and by [Client.Status], so it must be quick. LocalChanged is
// told each change of state of the local breaker, in order, while that
// breaker holds its lock: it must not call the local breaker. Force and
// Forced are an operator's override, as [Forcer]'s. SetRule makes ratio
// and minRequests the rule the pod judges the shared window by from now
// on (a change of the settings file); it is called between calls.
// FleetSync describes the pod's sync with the fleet, for Status. Every
// method is called from any goroutine, concurrently.
type SharedBreaker interface {
	Execute(send func() (*http.Response, error)) (*http.Response, error)
	Breaker() (observe.BreakerState, observe.BreakerCounts)
	LocalChanged(from, to observe.BreakerState)
	Force(state observe.BreakerState, until time.Time) error
	Forced() (observe.BreakerState, time.Time)
	SetRule(ratio float64, minRequests int)
	FleetSync() observe.FleetSync
}

// LocalBreaker is the pod's own breaker of a system (or a route), which
// a [SharedBreaker] wraps. Execute runs send at most once and returns
// what send returned, or refuses, having run nothing, with an error that
// matches [ErrCircuitOpen]; Breaker returns its state and counts now.
type LocalBreaker interface {
	Execute(send func() (*http.Response, error)) (*http.Response, error)
	Breaker() (observe.BreakerState, observe.BreakerCounts)
}

// BreakerFleet is a [Fleet] that shares its breakers as [SharedBreaker]s:
// the registry asks it for SharedBreaker, never for Circuit. The
// registry fills sys.States and sys.Forces before the call.
type BreakerFleet interface {
	Fleet
	SharedBreaker(sys FleetSystem, local LocalBreaker) (SharedBreaker, error)
}

// fleetReports is where what a system's fleet breaker reports goes: its
// changes of state and, for a system's own breaker (not a route's), the
// overrides learned from other pods.
type fleetReports struct {
	states func(from, to gobreaker.State)
	forces func(state observe.BreakerState, until time.Time) // nil: a route's, which no override reaches
}

// fleetCircuit returns the circuit of l, a system or a route at
// BREAKER_SCOPE=fleet, that wraps local, and the function local's changes
// of state go to from now on (nil: where they went). A fleet of either
// seam is asked: a [BreakerFleet] for a SharedBreaker, any other for a
// [Circuit].
func (o *options) fleetCircuit(l config.Loaded, local *localCircuit, to fleetReports) (Circuit, func(from, to gobreaker.State), error) {
	if o.fleet == nil {
		return nil, nil, noFleet(l.Prefix + "_BREAKER_SCOPE")
	}
	sys := o.fleetSystem(l)
	if bf, ok := o.fleet.(BreakerFleet); ok {
		sys.States = func(from, next observe.BreakerState) { to.states(gobreakerState(from), gobreakerState(next)) }
		sys.Forces = to.forces
		sb, err := bf.SharedBreaker(sys, localBreaker{local})
		if err == nil && sb == nil {
			err = errors.New("the fleet gave no breaker")
		}
		if err != nil {
			return nil, nil, err
		}
		return sharedCircuit{sb}, func(from, next gobreaker.State) { sb.LocalChanged(breaker.State(from), breaker.State(next)) }, nil
	}
	cb, err := o.fleet.Circuit(sys, local)
	if err == nil && cb == nil {
		err = errors.New("the fleet gave no breaker")
	}
	if err != nil {
		return nil, nil, err
	}
	var toFleet func(from, to gobreaker.State)
	if sr, ok := cb.(StateReporter); ok {
		toFleet = sr.ReportStates(to.states)
	}
	if f, ok := cb.(Forcer); ok && to.forces != nil {
		f.ReportForces(to.forces)
	}
	return cb, toFleet, nil
}

// localBreaker is a pod's own breaker as a [SharedBreaker] sees it: its
// refusals match ErrCircuitOpen (and wrap gobreaker's, which the breaker
// stage reads), its state and counts are outbound's.
type localBreaker struct{ lc *localCircuit }

func (b localBreaker) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	resp, err := b.lc.Execute(send)
	switch err {
	case gobreaker.ErrOpenState:
		return nil, breaker.Open
	case gobreaker.ErrTooManyRequests:
		return nil, breaker.ProbesBusy
	}
	return resp, err
}

func (b localBreaker) Breaker() (observe.BreakerState, observe.BreakerCounts) {
	return breaker.State(b.lc.State()), breakerCounts(b.lc.Counts())
}

// sharedCircuit is a [SharedBreaker] in the breaker stage's place: a
// refusal of its own reads as gobreaker's (open, or every probe taken
// while half-open), and it is a [Forcer] whose overrides learned
// elsewhere go to the FleetSystem's Forces.
type sharedCircuit struct{ sb SharedBreaker }

func (s sharedCircuit) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	resp, err := s.sb.Execute(send)
	if err == nil {
		return resp, nil
	}
	if _, sent := err.(*breaker.Attempt); sent || !errors.Is(err, ErrCircuitOpen) ||
		errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return resp, err // what send returned, or a local breaker's refusal
	}
	if st, _ := s.sb.Breaker(); st == observe.BreakerHalfOpen {
		return nil, gobreaker.ErrTooManyRequests
	}
	return nil, gobreaker.ErrOpenState
}

func (s sharedCircuit) State() gobreaker.State {
	st, _ := s.sb.Breaker()
	return gobreakerState(st)
}

func (s sharedCircuit) Counts() gobreaker.Counts {
	_, n := s.sb.Breaker()
	return gobreaker.Counts{
		Requests: n.Requests, TotalSuccesses: n.Successes, TotalFailures: n.Failures,
		TotalExclusions: n.Exclusions, ConsecutiveSuccesses: n.ConsecutiveSuccesses,
		ConsecutiveFailures: n.ConsecutiveFailures,
	}
}

func (s sharedCircuit) Force(state observe.BreakerState, until time.Time) error {
	return s.sb.Force(state, until)
}
func (s sharedCircuit) Forced() (observe.BreakerState, time.Time)          { return s.sb.Forced() }
func (s sharedCircuit) ReportForces(func(observe.BreakerState, time.Time)) {} // FleetSystem.Forces has it
func (s sharedCircuit) SetRule(ratio float64, minRequests int)             { s.sb.SetRule(ratio, minRequests) }
func (s sharedCircuit) FleetSync() observe.FleetSync                       { return s.sb.FleetSync() }

// gobreakerState is the gobreaker state of s.
func gobreakerState(s observe.BreakerState) gobreaker.State {
	switch s {
	case observe.BreakerOpen:
		return gobreaker.StateOpen
	case observe.BreakerHalfOpen:
		return gobreaker.StateHalfOpen
	}
	return gobreaker.StateClosed
}

// breakerCounts is n as Status shows it.
func breakerCounts(n gobreaker.Counts) observe.BreakerCounts {
	return observe.BreakerCounts{
		Requests: n.Requests, Successes: n.TotalSuccesses, Failures: n.TotalFailures,
		Exclusions: n.TotalExclusions, ConsecutiveSuccesses: n.ConsecutiveSuccesses,
		ConsecutiveFailures: n.ConsecutiveFailures,
	}
}
