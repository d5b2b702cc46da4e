// Package view renders what package stats counted: the live table the
// demo redraws every second, the breaker transitions, and the summary
// that explains, in sentences, what happened to each system.
//
// Calls are named by the registry's outcomes (ok, failed, gave_up,
// breaker_open, ...), the labels of the metrics and the logs; the
// refusals (an outcome whose Refused is true: nothing was sent) are shown
// apart, and left out of every success rate, as on the status page.
package view

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/outbound-go/outbound/cmd/outbound/internal/stats"
)

// ANSI sequences of the live view on a terminal.
const (
	Home  = "\x1b[H"
	Clear = "\x1b[2J"
)

// Dur renders a duration readably: 0.12ms, 3.4ms, 520ms, 1.3s; "-" for
// none.
func Dur(d time.Duration) string {
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

// LiveTable writes the table of one tick: per system its calls, those
// ok, those sent but not ok, those refused with no I/O, the retries, the
// breaker, the bulkhead's slots in use and the latency of the last
// second.
func LiveTable(w io.Writer, snaps []stats.Snap, elapsed, total time.Duration) {
	fmt.Fprintf(w, "outbound demo  %.1fs of %s\n\n", elapsed.Seconds(), Dur(total))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tcalls\tok\tnot ok\trefused\tretries\tbreaker\tin-flight\tp50 (1s)\tp99 (1s)\t")
	for _, s := range snaps {
		br := string(s.Status.Breaker)
		if s.Opened > 0 {
			br += fmt.Sprintf(" (opened %dx)", s.Opened)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d/%d\t%s\t%s\t\n",
			s.Name, s.Calls, s.OK(), s.Sent()-s.OK(), s.Refused(), s.Status.Retries, br,
			s.Status.InFlight, s.Status.Capacity, Dur(s.RecentP50), Dur(s.RecentP99))
	}
	tw.Flush()
}

// Events writes breaker transitions, one a line, indented.
func Events(w io.Writer, events []stats.Event) {
	for _, e := range events {
		fmt.Fprintf(w, "  %6s  %s\n", Dur(e.At), e.What)
	}
}
