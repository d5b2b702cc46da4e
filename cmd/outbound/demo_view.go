package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// ANSI sequences of the live view on a terminal.
const (
	ansiHome  = "\x1b[H"
	ansiClear = "\x1b[2J"
)

// fmtDur renders a latency readably: 0.12ms, 3.4ms, 520ms, 1.3s.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// times renders "once", "2 times".
func times(n uint64) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// writeLiveTable writes the live table of one tick.
func writeLiveTable(w io.Writer, snaps []snap, elapsed, total time.Duration) {
	fmt.Fprintf(w, "outbound demo  %.1fs of %s\n\n", elapsed.Seconds(), fmtDur(total))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tcalls\tok\tfailed\tretries\tbreaker\tin-flight\tshed:breaker\tshed:bulkhead\tp50 (1s)\tp99 (1s)\t")
	for _, s := range snaps {
		br := string(s.status.Breaker)
		if s.opened > 0 {
			br += fmt.Sprintf(" (opened %dx)", s.opened)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d/%d\t%d\t%d\t%s\t%s\t\n",
			s.name, s.calls, s.ok, s.calls-s.ok, s.status.Retries, br,
			s.status.InFlight, s.status.Capacity, s.status.BreakerRejected, s.status.BulkheadRejected,
			fmtDur(s.recentP50), fmtDur(s.recentP99))
	}
	tw.Flush()
}

// writeEvents writes breaker transitions, indented.
func writeEvents(w io.Writer, events []string) {
	for _, e := range events {
		fmt.Fprintln(w, "  "+e)
	}
}

// writeSummary explains, in sentences, what happened to each system.
func writeSummary(w io.Writer, snaps []snap, elapsed time.Duration, workers int, stopped bool) {
	how := "Summary after " + fmtDur(elapsed.Round(100*time.Millisecond))
	if stopped {
		how += " (stopped early)"
	}
	fmt.Fprintf(w, "\n%s, %d workers:\n\n", how, workers)
	var refusedBreaker, refusedBulkhead uint64
	var tripped, fast, slow []string
	for _, s := range snaps {
		fmt.Fprintf(w, "%s (%s)\n", s.name, s.role)
		for _, line := range describe(s) {
			fmt.Fprintln(w, "  "+line)
		}
		fmt.Fprintln(w)
		refusedBreaker += s.status.BreakerRejected
		refusedBulkhead += s.status.BulkheadRejected
		if s.opened > 0 {
			tripped = append(tripped, fmt.Sprintf("the breaker of %s opened %s", s.name, times(s.opened)))
		}
		switch {
		case s.calls == 0:
		case s.ok*100 >= s.calls*99 && s.answeredP99 < 100*time.Millisecond:
			fast = append(fast, fmt.Sprintf("%s (p99 %s)", s.name, fmtDur(s.answeredP99)))
		case s.ok*100 >= s.calls*90 && s.answeredP99 >= 100*time.Millisecond:
			slow = append(slow, fmt.Sprintf("%s (%d%% answered, p99 %s)", s.name, s.ok*100/s.calls, fmtDur(s.answeredP99)))
		}
	}

	if len(tripped) == 0 {
		fmt.Fprintln(w, "What tripped: nothing; every breaker stayed closed.")
	} else {
		fmt.Fprintf(w, "What tripped: %s.\n", strings.Join(tripped, "; "))
	}
	if shed := refusedBreaker + refusedBulkhead; shed == 0 {
		fmt.Fprintln(w, "What was shed: nothing; every call was sent.")
	} else {
		fmt.Fprintf(w, "What was shed: %d calls were refused before any I/O (%d by open breakers, %d by full bulkheads),\n"+
			"  so no worker waited on a system that could not answer.\n", shed, refusedBreaker, refusedBulkhead)
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

// describe returns the sentences about one system.
func describe(s snap) []string {
	if s.calls == 0 {
		return []string{"No calls were made (give --workers 4 or more to load every system)."}
	}
	var out []string
	failed := s.calls - s.ok
	if failed == 0 {
		out = append(out, fmt.Sprintf("%d calls, all answered.", s.calls))
	} else {
		parts := make([]string, 0, len(s.reasons))
		for _, r := range s.reasons {
			parts = append(parts, fmt.Sprintf("%d %s", r.n, r.reason))
		}
		out = append(out, fmt.Sprintf("%d calls, %d answered (%d%%); %d failed: %s.",
			s.calls, s.ok, s.ok*100/s.calls, failed, strings.Join(parts, ", ")))
	}

	var sent []string
	sent = append(sent, fmt.Sprintf("%d attempts reached the upstream", s.attempts))
	if s.attemptTimeouts > 0 {
		sent = append(sent, fmt.Sprintf("%d waited past the %s read timeout", s.attemptTimeouts, fmtDur(s.readTimeout)))
	}
	if s.attemptBusy > 0 {
		sent = append(sent, fmt.Sprintf("%d were answered 429 or 5xx", s.attemptBusy))
	}
	line := strings.Join(sent, "; ")
	switch {
	case s.status.Retries > 0:
		line += fmt.Sprintf("; %d retries were sent", s.status.Retries)
		if s.status.RetriesThrottled > 0 {
			line += fmt.Sprintf(" and %d denied by the retry budget", s.status.RetriesThrottled)
		}
	case s.retriesAllowed == 0:
		line += "; retries are off for it"
	}
	out = append(out, line+".")

	if s.opened == 0 {
		out = append(out, "Its breaker stayed closed.")
	} else {
		when := "first after"
		if s.opened == 1 {
			when = "after"
		}
		out = append(out, fmt.Sprintf("Its breaker opened %s, %s %s, and refused %d calls with no I/O; it ended %s.",
			times(s.opened), when, fmtDur(s.firstOpen), s.status.BreakerRejected, s.status.Breaker))
	}
	if s.status.BulkheadRejected > 0 {
		out = append(out, fmt.Sprintf("Its bulkhead (%d in flight) shed %d calls while the slots were taken.",
			s.status.Capacity, s.status.BulkheadRejected))
	}
	lat := fmt.Sprintf("Answered calls took p50 %s, p99 %s", fmtDur(s.answeredP50), fmtDur(s.answeredP99))
	if s.ok == 0 && s.answeredP99 == 0 {
		lat = "No call was answered"
	}
	if s.refusedN > 0 {
		lat += fmt.Sprintf("; refused calls failed fast, p99 %s", fmtDur(s.refusedP99))
		if s.attemptTimeouts > 0 {
			lat += fmt.Sprintf(", where an attempt that reached it waited %s for nothing", fmtDur(s.readTimeout))
		}
	}
	return append(out, lat+".")
}
