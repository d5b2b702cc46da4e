// Package limit builds a system's bulkhead from its settings (a fixed
// MAX_CONCURRENT, or an adaptive limit between MIN_CONCURRENT and it) and
// tells the observers of the large moves of an adaptive limit. It is
// internal: the registry's bulkhead stage uses what it builds.
package limit

import (
	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// New returns the bulkhead of system: fixed at MAX_CONCURRENT, or
// adaptive between MIN_CONCURRENT and it, whose moves of a quarter or
// more since the last one told go to the observers that implement
// observe.LimitObserver.
func New(system string, cfg config.Client, observers []observe.Observer) (*bulkhead.Bulkhead, error) {
	ceiling := int64(cfg.MaxConcurrent)
	if !cfg.AdaptiveConcurrency {
		return bulkhead.New(ceiling, cfg.BulkheadMaxWait)
	}
	t := &teller{system: system, shown: ceiling, ceiling: ceiling}
	for _, o := range observers {
		if lo, ok := o.(observe.LimitObserver); ok {
			t.to = append(t.to, lo)
		}
	}
	return bulkhead.NewAdaptive(int64(cfg.MinConcurrent), ceiling, cfg.BulkheadMaxWait,
		bulkhead.OnLimitChange(t.changed))
}

// teller tells the limit's large moves. It runs under the bulkhead's
// lock, which guards shown.
type teller struct {
	system         string
	shown, ceiling int64 // the limit last told
	to             []observe.LimitObserver
}

func (t *teller) changed(_, to int64) {
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
