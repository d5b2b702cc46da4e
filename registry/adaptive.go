package registry

import (
	"net/http"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
)

// The adaptive bulkhead's glue (ADAPTIVE_CONCURRENCY): the bulkhead
// stage builds it, call measures each call for it, and the observers
// that care hear when its limit moves a lot.

// newBulkhead is the bulkhead stage's construction: fixed at
// MAX_CONCURRENT, or adaptive between MIN_CONCURRENT and it.
func (c *Client) newBulkhead(cfg config.Client) (*bulkhead.Bulkhead, error) {
	ceiling := int64(cfg.MaxConcurrent)
	if !cfg.AdaptiveConcurrency {
		return bulkhead.New(ceiling, cfg.BulkheadMaxWait)
	}
	c.limitShown = ceiling
	return bulkhead.NewAdaptive(int64(cfg.MinConcurrent), ceiling, cfg.BulkheadMaxWait,
		bulkhead.OnLimitChange(c.limitChanged))
}

// limitChanged tells the LimitObservers of a move of a quarter or more
// since the last one told. It runs under the bulkhead's lock, which
// guards limitShown.
func (c *Client) limitChanged(_, to int64) {
	from := c.limitShown
	if d := to - from; 4*max(d, -d) < from {
		return
	}
	c.limitShown = to
	ev := observe.LimitEvent{System: c.name, From: from, To: to, Ceiling: c.bh.Capacity()}
	for _, o := range c.observers {
		if lo, ok := o.(observe.LimitObserver); ok {
			lo.ObserveLimit(ev)
		}
	}
}

// admitted starts the measure of a call for an adaptive bulkhead: the
// time it was admitted, or zero (no clock read) for a fixed one.
func (c *Client) admitted() time.Time {
	if !c.bh.Adaptive() {
		return time.Time{}
	}
	return time.Now()
}

// record gives an adaptive bulkhead the call's latency, from its
// admission to the response headers (or the error), retries included,
// and whether it failed as an overloaded upstream fails: a timeout, a
// transport error, a temporary status (408, 429, 5xx). Calls that tell
// nothing of the upstream's load are not recorded: the caller cancelled
// or its own deadline passed, the breaker refused, the registry closed,
// the request or the TLS configuration was wrong.
func (c *Client) record(start time.Time, resp *http.Response, err error) {
	failed := false
	switch e, _ := err.(*Error); {
	case err == nil:
		failed = policy.TemporaryStatus(resp.StatusCode)
	case e == nil:
		failed = true
	default:
		switch e.Op {
		case observe.OpCanceled, observe.OpBudgetTimeout, observe.OpBreaker, observe.OpClosed, observe.OpRequest, observe.OpTLS:
			return
		}
		failed = true
	}
	c.bh.Record(start, failed)
}
