package view

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/outbound-go/outbound/cmd/outbound/internal/stats"
	"github.com/outbound-go/outbound/observe"
)

// fastP99 is the p99 under which a system that answered (nearly) every
// call is called fast.
const fastP99 = 100 * time.Millisecond

// Summary is the end of a demo run.
type Summary struct {
	Snaps   []stats.Snap
	Elapsed time.Duration
	Workers int
	Stopped bool // Ctrl-C ended the run early
}

// Write explains, in sentences, what happened to each system, then what
// tripped, what was shed and what stayed fast.
func (s Summary) Write(w io.Writer) {
	how := "Summary after " + Dur(s.Elapsed.Round(100*time.Millisecond))
	if s.Stopped {
		how += " (stopped early)"
	}
	fmt.Fprintf(w, "\n%s, %d workers:\n\n", how, s.Workers)
	for _, snap := range s.Snaps {
		fmt.Fprintf(w, "%s (%s)\n", snap.Name, snap.Role)
		for _, line := range describe(snap) {
			fmt.Fprintln(w, "  "+line)
		}
		fmt.Fprintln(w)
	}
	s.writeTripped(w)
	s.writeShed(w)
	s.writeFast(w)
	fmt.Fprintln(w, "\nok, failed, gave_up, ... are the registry's outcomes, the labels of its metrics and logs;\n"+
		"a refusal (breaker_open, bulkhead_full, ...) sent nothing and is left out of the ok rate.")
}

func (s Summary) writeTripped(w io.Writer) {
	var tripped []string
	for _, snap := range s.Snaps {
		if snap.Opened > 0 {
			tripped = append(tripped, fmt.Sprintf("the breaker of %s opened %s", snap.Name, times(snap.Opened)))
		}
	}
	if len(tripped) == 0 {
		fmt.Fprintln(w, "What tripped: nothing; every breaker stayed closed.")
		return
	}
	fmt.Fprintf(w, "What tripped: %s.\n", strings.Join(tripped, "; "))
}

// writeShed adds up the refusals of every system, by outcome.
func (s Summary) writeShed(w io.Writer) {
	var total uint64
	var byOutcome [observe.NumOutcomes]uint64
	for _, snap := range s.Snaps {
		for _, c := range snap.Outcomes {
			if c.Outcome.Refused() {
				byOutcome[c.Outcome] += c.N
				total += c.N
			}
		}
	}
	if total == 0 {
		fmt.Fprintln(w, "What was shed: nothing; every call was sent.")
		return
	}
	var parts []string
	for _, o := range observe.CallOutcomes() {
		if byOutcome[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", byOutcome[o], o))
		}
	}
	fmt.Fprintf(w, "What was shed: %d calls were refused before any I/O (%s),\n"+
		"  so no worker waited on a system that could not answer.\n", total, strings.Join(parts, ", "))
}

// writeFast names the systems that answered (nearly) every call, fast
// or slowly.
func (s Summary) writeFast(w io.Writer) {
	var fast, slow []string
	for _, snap := range s.Snaps {
		ok, calls := snap.OK(), snap.Calls
		switch {
		case calls == 0:
		case ok*100 >= calls*99 && snap.SucceededP99 < fastP99:
			fast = append(fast, fmt.Sprintf("%s (p99 %s)", snap.Name, Dur(snap.SucceededP99)))
		case ok*100 >= calls*90 && snap.SucceededP99 >= fastP99:
			slow = append(slow, fmt.Sprintf("%s (%d%% ok, p99 %s)", snap.Name, ok*100/calls, Dur(snap.SucceededP99)))
		}
	}
	if len(fast) > 0 {
		fmt.Fprintf(w, "What stayed fast: %s answered every call quickly while the others failed next to it:\n"+
			"  each system has its own connection pool, bulkhead and breaker.\n", strings.Join(fast, ", "))
	} else {
		fmt.Fprintln(w, "What stayed fast: no system answered quickly enough to call fast (under 100ms at p99).")
	}
	if len(slow) > 0 {
		fmt.Fprintf(w, "Slow but served: %s; slow is not broken, and a retry\n"+
			"  replaced most attempts that passed the read timeout.\n", strings.Join(slow, ", "))
	}
}
