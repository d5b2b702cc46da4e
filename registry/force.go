package registry

import (
	"fmt"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// Forcer is an optional interface of a [Circuit] given by a [Fleet]: an
// operator's override of the breaker shared by the fleet. Force writes it
// (state "" releases it) for every pod, where it holds until until;
// Forced returns the override in force now ("" when none) and when it
// ends, and is on every call's path. ReportForces, called once before any
// call, gives the hook to call, once per change, with an override learned
// from elsewhere (not this pod's own Force): the observers hear of it.
//
// Deprecated: [SharedBreaker] has Force and Forced, and reports to
// [FleetSystem.Forces], given at construction; see [Circuit].
type Forcer interface {
	Force(state observe.BreakerState, until time.Time) error
	Forced() (observe.BreakerState, time.Time)
	ReportForces(report func(state observe.BreakerState, until time.Time))
}

// Force overrides the system's breaker for d (at most 24 hours), for
// an operator during an incident: [observe.BreakerOpen] refuses every
// call with no I/O (op observe.OpForcedOpen, reason "forced-open",
// matching [ErrCircuitOpen]); [observe.BreakerClosed] lets every call
// through whatever the evidence; "" releases the breaker back to its own
// judgement at once. After d the override ends unless renewed. At
// BREAKER_SCOPE=fleet it goes through the fleet's Redis to every pod (and
// survives a restart), and fails when Redis does not take it. Status and
// the observers (observe.ForceObserver, the log) show it.
func (c *Client) Force(state observe.BreakerState, d time.Duration) error {
	switch {
	case state != observe.BreakerOpen && state != observe.BreakerClosed && state != "":
		return fmt.Errorf("outbound %s: a breaker is forced open or closed, not %q", c.name, state)
	case state != "" && (d <= 0 || d > observe.MaxForce):
		return fmt.Errorf("outbound %s: a breaker is forced for more than 0 and at most %v, not %v", c.name, observe.MaxForce, d)
	}
	var until time.Time
	if state != "" {
		until = time.Now().Add(d)
	}
	if f, ok := c.cb.(Forcer); ok {
		if err := f.Force(state, until); err != nil {
			return fmt.Errorf("outbound %s: forcing the fleet's breaker: %w", c.name, err)
		}
	} else {
		c.force.Set(state, until)
	}
	c.forceChanged(state, until)
	return nil
}

// forceChanged tells the observers of an override (or its release).
func (c *Client) forceChanged(state observe.BreakerState, until time.Time) {
	each(c.observers, func(fo observe.ForceObserver) { fo.ObserveForce(c.name, state, until) })
}
