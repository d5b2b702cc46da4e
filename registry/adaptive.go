package registry

import (
	"net/http"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
)

// adaptiveStage measures each call for an adaptive bulkhead
// (ADAPTIVE_CONCURRENCY=true): its latency from admission to the
// response headers (or the error), redirects and retries included, and
// whether it failed as an overloaded upstream fails (a timeout, a
// transport error, a temporary status). Calls that tell nothing of the
// upstream's load are not recorded: the table of ops says which
// (observe.Op.Load). It is in the chain only with an adaptive bulkhead.
type adaptiveStage struct {
	bh   *bulkhead.Bulkhead
	next callStage
}

func (s *adaptiveStage) handle(cl *call) (*http.Response, error) {
	start := time.Now()
	resp, err := s.next.handle(cl)
	switch e, _ := err.(*Error); {
	case err == nil:
		s.bh.Record(start, policy.TemporaryStatus(resp.StatusCode))
	case e == nil || e.Op.Load():
		s.bh.Record(start, true)
	}
	return resp, err
}

// newBulkhead builds the bulkhead stage's semaphore: fixed at
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
