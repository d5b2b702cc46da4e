// Package force holds an operator's override of a system's breaker
// (registry.Client.Force): this pod's own, or the one a fleet shares and
// this pod reads. It is internal: the registry's entry and breaker stage
// ask it, on every call, whether an override is in force.
package force

import (
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// Shared is an override a fleet shares: the state in force ("" when none)
// and when it ends.
type Shared interface {
	Forced() (observe.BreakerState, time.Time)
}

// Override is a system's override. Its zero value holds none, of its
// own. It is safe for concurrent use.
type Override struct {
	shared Shared // nil: the override is this pod's own
	own    atomic.Pointer[own]
}

type own struct {
	state observe.BreakerState
	until time.Time
}

// Share makes s the override's source, in place of this pod's own. It
// is called once, before any call.
func (o *Override) Share(s Shared) { o.shared = s }

// Set sets this pod's own override ("" releases it).
func (o *Override) Set(state observe.BreakerState, until time.Time) {
	o.own.Store(&own{state: state, until: until})
}

// State is the override in force now, "" when none. Without an override
// it costs one atomic load.
func (o *Override) State() observe.BreakerState {
	s, until := o.get()
	if s == "" || !time.Now().Before(until) {
		return ""
	}
	return s
}

// Status is the override in force, for Status; nil when none.
func (o *Override) Status() *observe.Forced {
	s, until := o.get()
	if s == "" || !time.Now().Before(until) {
		return nil
	}
	return &observe.Forced{State: s, Until: until}
}

func (o *Override) get() (observe.BreakerState, time.Time) {
	if o.shared != nil {
		return o.shared.Forced()
	}
	if f := o.own.Load(); f != nil {
		return f.state, f.until
	}
	return "", time.Time{}
}
