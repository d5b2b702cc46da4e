package registry

import "github.com/outbound-go/outbound/observe"

// Status returns a snapshot of the client.
func (c *Client) Status() observe.Status {
	n := c.cb.Counts()
	var fleet *observe.FleetSync
	if f, ok := c.cb.(interface{ FleetSync() observe.FleetSync }); ok {
		fs := f.FleetSync()
		fleet = &fs
	}
	return observe.Status{
		System:  c.name,
		Breaker: breakerState(c.cb.State()),
		BreakerCounts: observe.BreakerCounts{
			Requests: n.Requests, Successes: n.TotalSuccesses, Failures: n.TotalFailures,
			Exclusions: n.TotalExclusions, ConsecutiveSuccesses: n.ConsecutiveSuccesses,
			ConsecutiveFailures: n.ConsecutiveFailures,
		},
		InFlight:          c.bh.InFlight(),
		Capacity:          c.bh.Capacity(),
		Limit:             c.bh.Limit(),
		Calls:             c.stats.calls.Load(),
		OK:                c.stats.ok.Load(),
		Retries:           c.stats.retries.Load(),
		GaveUp:            c.stats.gaveUp.Load(),
		BulkheadRejected:  c.bh.Rejected(),
		BreakerRejected:   c.stats.breakerRejected.Load(),
		BudgetRejected:    c.stats.budgetRejected.Load(),
		BudgetCapped:      c.stats.capped.Load(),
		RetryBudgetDenied: c.stats.retryBudgetDenied.Load(),
		Fleet:             fleet,
		HedgesSent:        c.stats.hedges.Load(),
		HedgesWon:         c.stats.hedgesWon.Load(),
		Config:            c.vars(),
		Faults:            c.Faults(),
		InjectedAborts:    c.faults.abortCount(),
		InjectedDelays:    c.faults.delayCount(),
	}
}

// Status returns a snapshot of every client, in declaration order.
func (r *Registry) Status() []observe.Status {
	out := make([]observe.Status, 0, len(r.names))
	for _, n := range r.names {
		out = append(out, r.clients[n].Status())
	}
	return out
}
