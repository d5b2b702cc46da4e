package registry

import (
	"net/http"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
)

// newBulkhead returns the bulkhead of system: fixed at MAX_CONCURRENT, or
// adaptive between MIN_CONCURRENT and it, whose moves of a quarter or
// more since the last one told go to the observers that implement
// observe.LimitObserver.
func newBulkhead(system string, cfg config.Client, observers []observe.Observer) (*bulkhead.Bulkhead, error) {
	ceiling := int64(cfg.MaxConcurrent)
	if !cfg.AdaptiveConcurrency {
		return bulkhead.New(ceiling, cfg.BulkheadMaxWait)
	}
	t := &limitTeller{system: system, shown: ceiling, ceiling: ceiling}
	for _, o := range observers {
		if lo, ok := o.(observe.LimitObserver); ok {
			t.to = append(t.to, lo)
		}
	}
	return bulkhead.NewAdaptive(int64(cfg.MinConcurrent), ceiling, cfg.BulkheadMaxWait,
		bulkhead.OnLimitChange(t.changed))
}

// limitTeller tells an adaptive limit's large moves. It runs under the
// bulkhead's lock, which guards shown.
type limitTeller struct {
	system         string
	shown, ceiling int64 // the limit last told
	to             []observe.LimitObserver
}

func (t *limitTeller) changed(_, to int64) {
	from := t.shown
	if d := to - from; 4*max(d, -d) < from {
		return
	}
	t.shown = to
	ev := observe.LimitEvent{System: t.system, From: from, To: to, Ceiling: t.ceiling}
	for _, o := range t.to {
		o.ObserveLimit(ev)
	}
}

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
