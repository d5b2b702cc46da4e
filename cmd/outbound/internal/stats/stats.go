// Package stats counts what the demo sees of each system: its calls by
// the registry's own outcome (package observe: ok, failed, gave_up,
// breaker_open, ...), what ended those that were not ok, the latency the
// callers measured, the attempts that reached the upstream, and the
// breaker's transitions.
//
// Calls are counted from the registry's call events, never re-classified
// here: a 501 is "failed" because the registry's breaker counts it so,
// and a refusal is an outcome whose [observe.Outcome.Refused] is true
// (nothing was sent). The demo's summary, the metrics and the status page
// read the same labels.
package stats

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// System is what the demo saw of one system. Safe for concurrent use.
type System struct {
	mu        sync.Mutex
	outcomes  [observe.NumOutcomes]uint64            // calls by how they ended
	causes    [observe.NumOutcomes]map[string]uint64 // what ended them, for the outcomes that say no more
	succeeded hist                                   // calls that returned no error to the caller
	refused   hist                                   // calls refused with no I/O
	recent    hist                                   // every call since the last snapshot

	attempts     uint64 // attempts sent to the upstream
	readTimeouts uint64 // attempts that waited past READ_TIMEOUT
	busy         uint64 // attempts answered 429 or 5xx
	opened       uint64 // breaker transitions to open
	firstOpen    time.Duration
}

// RecordLatency adds the time one call took as its caller measured it,
// err being what the call returned. A call is refused when the registry
// says so: its error's op is one whose outcome is a refusal (package
// observe's table).
func (s *System) RecordLatency(d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recent.add(d)
	var re *registry.Error
	switch {
	case err == nil:
		s.succeeded.add(d)
	case errors.As(err, &re) && re.Op.Outcome(false).Refused():
		s.refused.add(d)
	}
}

// call counts one call by its outcome and cause.
func (s *System) call(ev observe.CallEvent) {
	if ev.Outcome >= observe.Outcome(observe.NumOutcomes) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[ev.Outcome]++
	if c := cause(ev); c != "" {
		if s.causes[ev.Outcome] == nil {
			s.causes[ev.Outcome] = map[string]uint64{}
		}
		s.causes[ev.Outcome][c]++
	}
}

// cause says what ended a call whose outcome does not say it alone: the
// status it was answered with ("answered 503"), the status it gave up on
// ("status 429"), or the op that ended it ("read timeout"). It is empty
// for ok, for a refusal and for a cancellation.
func cause(ev observe.CallEvent) string {
	var re *registry.Error
	switch {
	case ev.Outcome == observe.OutcomeOK, ev.Outcome == observe.OutcomeCanceled, ev.Outcome.Refused():
		return ""
	case ev.Status != 0:
		return fmt.Sprintf("answered %d", ev.Status)
	case errors.As(ev.Err, &re) && re.StatusCode != 0:
		return fmt.Sprintf("status %d", re.StatusCode)
	}
	return ev.Op.String()
}

// attempt counts one attempt that reached the upstream.
func (s *System) attempt(ev observe.AttemptEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	switch {
	case ev.Op == observe.OpReadTimeout:
		s.readTimeouts++
	case ev.Status == 429 || ev.Status >= 500:
		s.busy++
	}
}

// breakerOpened counts a transition to open, at time at of the demo.
func (s *System) breakerOpened(at time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened == 0 {
		s.firstOpen = at
	}
	s.opened++
}

// Snapshot copies what s saw; with resetRecent the window of the recent
// latencies starts again.
func (s *System) Snapshot(resetRecent bool) Snap {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Snap{
		RecentP50: s.recent.quantile(0.5), RecentP99: s.recent.quantile(0.99),
		SucceededP50: s.succeeded.quantile(0.5), SucceededP99: s.succeeded.quantile(0.99),
		RefusedP99: s.refused.quantile(0.99), RefusedTimed: s.refused.n,
		Attempts: s.attempts, ReadTimeouts: s.readTimeouts, Busy: s.busy,
		Opened: s.opened, FirstOpen: s.firstOpen,
	}
	for _, o := range observe.CallOutcomes() {
		if n := s.outcomes[o]; n > 0 {
			out.Calls += n
			out.Outcomes = append(out.Outcomes, Count{Outcome: o, N: n, Causes: sortedCauses(s.causes[o])})
		}
	}
	if resetRecent {
		s.recent = hist{}
	}
	return out
}

// sortedCauses returns the causes most frequent first.
func sortedCauses(m map[string]uint64) []Cause {
	out := make([]Cause, 0, len(m))
	for what, n := range m {
		out = append(out, Cause{What: what, N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].What < out[j].What
	})
	return out
}
