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
// ends. Forced is on every call's path and must be quick.
//
// ReportForces is called once, while the registry builds the client,
// before any call: from then on the Forcer calls report for every
// override it learns of from elsewhere (another pod, the command line,
// its periodic read), once per change, so that this pod's observers hear
// of it too; not for its own Force, which the registry reports.
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
// judgement at once. Once d has passed the override ends by itself unless
// Force renewed it. At BREAKER_SCOPE=fleet the override goes through the
// fleet's Redis to every pod (and survives a pod's restart); it fails
// when Redis does not take it. Status, the observers (observe.ForceObserver)
// and the logger say when a breaker is forced.
func (c *Client) Force(state observe.BreakerState, d time.Duration) error {
	switch {
	case state != observe.BreakerOpen && state != observe.BreakerClosed && state != "":
		return fmt.Errorf("outbound %s: a breaker is forced open or closed, not %q", c.name, state)
	case state != "" && (d <= 0 || d > observe.MaxForce):
		return fmt.Errorf("outbound %s: a breaker is forced for more than 0 and at most %v, not %v", c.name, observe.MaxForce, d)
	}
	until := time.Now().Add(d)
	if state == "" {
		until = time.Time{}
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

// forceChanged tells the observers that an operator forced (or released)
// the breaker.
func (c *Client) forceChanged(state observe.BreakerState, until time.Time) {
	for _, o := range c.observers {
		if fo, ok := o.(observe.ForceObserver); ok {
			fo.ObserveForce(c.name, state, until)
		}
	}
}
