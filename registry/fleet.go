package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/observe"
)

// Fleet is the seam of module github.com/outbound-go/outbound/fleet: it
// gives each system whose BREAKER_SCOPE is fleet the [Circuit] it shares
// with the other pods of the service, and each whose RATE_SCOPE is fleet
// its share of the fleet's [Quota]. The registry calls it once per such
// system while it builds the client, with what it tells of the system
// ([FleetSystem]: its name, settings and the registry's logger) and its
// own (local) breaker or quota, which the fleet's wraps; an error fails
// the build. Services do not implement it: (*fleet.Fleet).Option gives
// it.
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

// fleetCircuit returns the circuit of l, a system at BREAKER_SCOPE=fleet.
func (o *options) fleetCircuit(l config.Loaded, local Circuit) (Circuit, error) {
	if o.fleet == nil {
		return nil, noFleet(l.Prefix + "_BREAKER_SCOPE")
	}
	cb, err := o.fleet.Circuit(o.fleetSystem(l), local)
	if err == nil && cb == nil {
		err = errors.New("the fleet gave no breaker")
	}
	return cb, err
}

// fleetQuota returns the quota of l, a system at RATE_SCOPE=fleet.
func (o *options) fleetQuota(l config.Loaded, local Quota) (Quota, error) {
	if o.fleet == nil {
		return nil, noFleet(l.Prefix + "_RATE_SCOPE")
	}
	q, err := o.fleet.Quota(o.fleetSystem(l), local)
	if err == nil && q == nil {
		err = errors.New("the fleet gave no quota")
	}
	return q, err
}

// fleetSystem is what the fleet is told of l.
func (o *options) fleetSystem(l config.Loaded) FleetSystem {
	return FleetSystem{Name: l.Name, Settings: l.Client, Logger: o.logger, Judge: breaker.Judge}
}

func noFleet(variable string) error {
	return fmt.Errorf("%s=fleet, but the registry has no fleet: build it with the option of github.com/outbound-go/outbound/fleet ((*fleet.Fleet).Option())", variable)
}
