package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// hist is a latency histogram with log-scale buckets 2^(1/8) (~9%) wide
// from 10µs to ~3min, so percentiles cost constant memory however long
// the demo runs. Quantiles report a bucket's upper bound. Not safe for
// concurrent use: sysStats's mutex guards it.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
}

const (
	histBase      = 10 * time.Microsecond
	histPerOctave = 8
	histBuckets   = histPerOctave * 24
)

func (h *hist) add(d time.Duration) {
	i := 0
	if d > histBase {
		i = int(math.Ceil(histPerOctave * math.Log2(float64(d)/float64(histBase))))
	}
	h.counts[min(i, histBuckets-1)]++
	h.n++
}

// quantile returns the q-quantile (0 < q <= 1), or 0 for no samples.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= max(rank, 1) {
			return time.Duration(float64(histBase) * math.Exp2(float64(i)/histPerOctave))
		}
	}
	return 0
}

// sysStats is what the demo saw of one system: the workers' calls and,
// through the observer, the attempts and breaker transitions. Safe for
// concurrent use.
type sysStats struct {
	mu       sync.Mutex
	calls    uint64
	ok       uint64
	reasons  map[string]uint64 // failed calls by reason
	answered hist              // calls that succeeded
	refused  hist              // calls refused with no I/O (breaker, bulkhead)
	recent   hist              // every call since the last snapshot

	attempts        uint64 // attempts sent to the upstream
	attemptTimeouts uint64 // attempts that timed out
	attemptBusy     uint64 // attempts answered 429 or 5xx
	opened          uint64 // breaker transitions to open
	firstOpen       time.Duration
}

// refusal reasons: the call was refused before any I/O.
const (
	reasonBreaker  = "refused by the open breaker"
	reasonBulkhead = "refused by the full bulkhead"
)

// reason names why a call failed, in words for the summary.
func reason(err error) string {
	var se *adapters.StatusError
	var re *registry.Error
	switch {
	case errors.Is(err, registry.ErrCircuitOpen):
		return reasonBreaker
	case errors.Is(err, bulkhead.ErrFull):
		return reasonBulkhead
	case errors.Is(err, capbudget.ErrExhausted):
		return "refused: budget spent"
	case errors.As(err, &se):
		return fmt.Sprintf("answered %d", se.StatusCode)
	case errors.As(err, &re) && re.Op == observe.OpStatus:
		return fmt.Sprintf("gave up on %d", re.StatusCode)
	case errors.As(err, &re) && re.Timeout():
		return "timed out"
	case errors.As(err, &re):
		return "failed: " + re.Op.String()
	}
	return "failed: bad answer"
}

// record adds one call that took d and ended with err.
func (s *sysStats) record(d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.recent.add(d)
	if err == nil {
		s.ok++
		s.answered.add(d)
		return
	}
	r := reason(err)
	s.reasons[r]++
	if r == reasonBreaker || r == reasonBulkhead {
		s.refused.add(d)
	}
}

// demoObserver feeds the attempts and breaker transitions of every client
// into the stats and the event log. Its methods are quick and never call
// back into a client, as observe.Observer requires.
type demoObserver struct {
	start  time.Time
	stats  map[string]*sysStats // fixed before the registry is built
	events *eventLog
}

func (o *demoObserver) ObserveAttempt(ev observe.AttemptEvent) {
	s := o.stats[ev.System]
	if s == nil || ev.Outcome == observe.OutcomeBreakerOpen {
		return // refused by the breaker: nothing was sent
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	var ne net.Error
	switch {
	case ev.Err != nil && (errors.As(ev.Err, &ne) && ne.Timeout() || errors.Is(ev.Err, context.DeadlineExceeded)):
		s.attemptTimeouts++
	case ev.Status == 429 || ev.Status >= 500:
		s.attemptBusy++
	}
}

func (o *demoObserver) ObserveCall(observe.CallEvent) {}

func (o *demoObserver) ObserveBreaker(system string, from, to observe.BreakerState) {
	at := time.Since(o.start)
	if s := o.stats[system]; s != nil && to == observe.BreakerOpen {
		s.mu.Lock()
		if s.opened == 0 {
			s.firstOpen = at
		}
		s.opened++
		s.mu.Unlock()
	}
	o.events.add(at, fmt.Sprintf("%-9s breaker %s -> %s", system, from, to))
}

// eventLog keeps the breaker transitions for the live view. Safe for
// concurrent use.
type eventLog struct {
	mu   sync.Mutex
	list []string
}

func (l *eventLog) add(at time.Duration, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.list) < 10000 { // a flapping breaker cannot eat the memory
		l.list = append(l.list, fmt.Sprintf("%6s  %s", fmtDur(at), what))
	}
}

// since returns the events from index i on.
func (l *eventLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.list) {
		return nil
	}
	return append([]string(nil), l.list[i:]...)
}

// snap is a copy of one system's stats and status, for rendering.
type snap struct {
	name, role      string
	calls, ok       uint64
	reasons         []reasonCount // most frequent first
	refusedN        uint64
	recentP50       time.Duration
	recentP99       time.Duration
	answeredP50     time.Duration
	answeredP99     time.Duration
	refusedP99      time.Duration
	attempts        uint64
	attemptTimeouts uint64
	attemptBusy     uint64
	opened          uint64
	firstOpen       time.Duration
	status          observe.Status
	readTimeout     time.Duration
	retriesAllowed  int
}

type reasonCount struct {
	reason string
	n      uint64
}

// snapshot copies s; with resetRecent the "recent" window starts again.
func (s *sysStats) snapshot(resetRecent bool) snap {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := snap{
		calls: s.calls, ok: s.ok,
		refusedN:    s.refused.n,
		recentP50:   s.recent.quantile(0.5),
		recentP99:   s.recent.quantile(0.99),
		answeredP50: s.answered.quantile(0.5),
		answeredP99: s.answered.quantile(0.99),
		refusedP99:  s.refused.quantile(0.99),
		attempts:    s.attempts, attemptTimeouts: s.attemptTimeouts, attemptBusy: s.attemptBusy,
		opened: s.opened, firstOpen: s.firstOpen,
	}
	for r, n := range s.reasons {
		out.reasons = append(out.reasons, reasonCount{r, n})
	}
	sort.Slice(out.reasons, func(i, j int) bool {
		if out.reasons[i].n != out.reasons[j].n {
			return out.reasons[i].n > out.reasons[j].n
		}
		return out.reasons[i].reason < out.reasons[j].reason
	})
	if resetRecent {
		s.recent = hist{}
	}
	return out
}
