package stats

import (
	"time"

	"github.com/outbound-go/outbound/observe"
)

// Snap is a copy of what the demo saw of one system, for rendering. The
// demo fills Name, Role, Status, ReadTimeout and RetriesAllowed.
type Snap struct {
	Name, Role string

	// Calls is every call the registry told of, whatever its outcome.
	Calls uint64
	// Outcomes are the calls by outcome, in the order of
	// observe.CallOutcomes, outcomes of no call left out.
	Outcomes []Count

	RecentP50, RecentP99       time.Duration // every call since the last snapshot
	SucceededP50, SucceededP99 time.Duration // calls that returned no error
	RefusedP99                 time.Duration // calls refused with no I/O
	RefusedTimed               uint64        // refused calls whose latency was measured

	Attempts     uint64 // attempts that reached the upstream
	ReadTimeouts uint64 // attempts that waited past READ_TIMEOUT
	Busy         uint64 // attempts answered 429 or 5xx

	Opened    uint64        // breaker transitions to open
	FirstOpen time.Duration // since the demo's start, when Opened > 0

	Status         observe.Status
	ReadTimeout    time.Duration
	RetriesAllowed int
}

// Count is how many calls ended with one outcome, and what ended them.
type Count struct {
	Outcome observe.Outcome
	N       uint64
	// Causes, most frequent first, for the outcomes whose label does not
	// say it all (failed, gave_up, retry_throttled); empty for others.
	Causes []Cause
}

// Cause is what ended N calls: "answered 501", "read timeout".
type Cause struct {
	What string
	N    uint64
}

// N returns the number of calls that ended with o.
func (s Snap) N(o observe.Outcome) uint64 {
	for _, c := range s.Outcomes {
		if c.Outcome == o {
			return c.N
		}
	}
	return 0
}

// OK returns the number of calls that ended ok.
func (s Snap) OK() uint64 { return s.N(observe.OutcomeOK) }

// Refused returns the number of calls refused before anything was sent:
// the outcomes whose Refused is true.
func (s Snap) Refused() uint64 {
	var n uint64
	for _, c := range s.Outcomes {
		if c.Outcome.Refused() {
			n += c.N
		}
	}
	return n
}

// Sent returns the number of calls not refused: the calls a success rate
// is taken over.
func (s Snap) Sent() uint64 { return s.Calls - s.Refused() }
