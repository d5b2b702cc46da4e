package registry

import (
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/observe"
)

// Status returns a snapshot of the client.
func (c *Client) Status() observe.Status {
	n := c.cb.Counts()
	var fleet *observe.FleetSync
	if f, ok := c.cb.(interface{ FleetSync() observe.FleetSync }); ok {
		fs := f.FleetSync()
		fleet = &fs
	}
	ps := c.pol.Load()
	var rate *observe.RateStatus
	if ps.quota != nil {
		rs := ps.quota.Status()
		rs.Refused = c.stats.rateRefused.Load()
		rate = &rs
	}
	st := observe.Status{
		Rate:    rate,
		Routes:  c.routeStatus(ps),
		System:  c.name,
		Breaker: breaker.State(c.cb.State()),
		Forced:  c.force.Status(),
		BreakerCounts: observe.BreakerCounts{
			Requests: n.Requests, Successes: n.TotalSuccesses, Failures: n.TotalFailures,
			Exclusions: n.TotalExclusions, ConsecutiveSuccesses: n.ConsecutiveSuccesses,
			ConsecutiveFailures: n.ConsecutiveFailures,
		},
		InFlight: c.bh.InFlight(),
		Capacity: c.bh.Capacity(),
		Limit:    c.bh.Limit(),
		Calls:    c.stats.calls.Load(),
		OK:       c.ended(observe.OutcomeOK),
		Retries:  c.stats.retries.Load(),
		GaveUp: c.ended(observe.OutcomeGaveUp) + c.ended(observe.OutcomeFailed) + c.ended(observe.OutcomeRetryThrottled) +
			c.ended(observe.OutcomeCanceled),
		BulkheadRefused: c.bh.Refused(),
		BreakerRefused: c.refusedBy(observe.OutcomeBreakerOpen) + c.ended(observe.OutcomeBreakerOpen) +
			c.refusedBy(observe.OutcomeForcedOpen) + c.ended(observe.OutcomeForcedOpen),
		BudgetRefused:    c.refusedBy(observe.OutcomeBudgetSpent),
		BudgetCapped:     c.stats.capped.Load(),
		RetriesThrottled: c.ended(observe.OutcomeRetryThrottled),
		Fleet:            fleet,
		HedgesSent:       c.stats.hedges.Load(),
		HedgesWon:        c.stats.hedgesWon.Load(),
		Config:           ps.vars(),
		Faults:           c.faults.describe(),
		InjectedAborts:   c.faults.aborts(),
		InjectedDelays:   c.faults.delays(),
	}
	st.Outcomes = make(map[string]uint64, observe.NumOutcomes)
	for _, o := range observe.CallOutcomes() {
		n := c.ended(o) + c.refusedBy(o)
		st.Outcomes[o.String()] = n
		if !o.Refused() {
			st.Sent += c.ended(o)
		}
	}
	if st.Forced != nil {
		st.Breaker = st.Forced.State // what calls meet
	}
	return st
}

// ended and refusedBy are the counts of calls that ended with out, after
// and before the bulkhead admitted them.
func (c *Client) ended(out observe.Outcome) uint64     { return c.stats.ended[out].Load() }
func (c *Client) refusedBy(out observe.Outcome) uint64 { return c.stats.refused[out].Load() }

// Status returns a snapshot of every client, in declaration order.
func (r *Registry) Status() []observe.Status {
	out := make([]observe.Status, 0, len(r.names))
	for _, n := range r.names {
		out = append(out, r.clients[n].Status())
	}
	return out
}
