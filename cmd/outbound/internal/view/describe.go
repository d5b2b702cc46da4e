package view

import (
	"fmt"
	"strings"

	"github.com/outbound-go/outbound/cmd/outbound/internal/stats"
	"github.com/outbound-go/outbound/observe"
)

// describe returns the sentences about one system.
func describe(s stats.Snap) []string {
	if s.Calls == 0 {
		return []string{"No calls were made (give --workers 4 or more to load every system)."}
	}
	out := append(callsLines(s), attemptsLine(s))
	out = append(out, breakerLines(s)...)
	return append(out, latencyLine(s))
}

// callsLines count the calls by outcome: the refusals apart, then the
// calls sent, with their ok rate.
func callsLines(s stats.Snap) []string {
	if s.OK() == s.Calls {
		return []string{fmt.Sprintf("%d calls, all ok.", s.Calls)}
	}
	var refused []string
	sent := []string{fmt.Sprintf("%d ok (%d%%)", s.OK(), s.OK()*100/max(s.Sent(), 1))}
	for _, c := range s.Outcomes {
		switch {
		case c.Outcome.Refused():
			refused = append(refused, fmt.Sprintf("%d %s", c.N, c.Outcome))
		case c.Outcome != observe.OutcomeOK:
			sent = append(sent, fmt.Sprintf("%d %s%s", c.N, c.Outcome, causes(c)))
		}
	}
	if len(refused) == 0 {
		return []string{fmt.Sprintf("%d calls: %s.", s.Calls, strings.Join(sent, ", "))}
	}
	out := []string{fmt.Sprintf("%d calls, %d refused with no I/O (%s).", s.Calls, s.Refused(), strings.Join(refused, ", "))}
	if s.Sent() == 0 {
		return append(out, "None was sent.")
	}
	return append(out, fmt.Sprintf("Of the %d sent: %s.", s.Sent(), strings.Join(sent, ", ")))
}

// causes says what ended the calls of c: " (answered 503)", or
// " (30 read timeout, 2 call timeout)" when there were several causes.
func causes(c stats.Count) string {
	switch {
	case len(c.Causes) == 0:
		return ""
	case len(c.Causes) == 1:
		return " (" + c.Causes[0].What + ")"
	}
	parts := make([]string, len(c.Causes))
	for i, cause := range c.Causes {
		parts[i] = fmt.Sprintf("%d %s", cause.N, cause.What)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// attemptsLine says what reached the upstream, and the retries.
func attemptsLine(s stats.Snap) string {
	sent := []string{fmt.Sprintf("%d attempts reached the upstream", s.Attempts)}
	if s.ReadTimeouts > 0 {
		sent = append(sent, fmt.Sprintf("%d waited past the %s read timeout", s.ReadTimeouts, Dur(s.ReadTimeout)))
	}
	if s.Busy > 0 {
		sent = append(sent, fmt.Sprintf("%d were answered 429 or 5xx", s.Busy))
	}
	line := strings.Join(sent, "; ")
	switch {
	case s.Status.Retries > 0:
		line += fmt.Sprintf("; %d retries were sent", s.Status.Retries)
		if n := s.N(observe.OutcomeRetryThrottled); n > 0 {
			line += fmt.Sprintf(" and %d denied by the retry throttle", n)
		}
	case s.RetriesAllowed == 0:
		line += "; retries are off for it"
	}
	return line + "."
}

// breakerLines say what the breaker and the bulkhead refused.
func breakerLines(s stats.Snap) []string {
	var out []string
	if s.Opened == 0 {
		out = append(out, "Its breaker stayed closed.")
	} else {
		when := "first after"
		if s.Opened == 1 {
			when = "after"
		}
		out = append(out, fmt.Sprintf("Its breaker opened %s, %s %s, and refused %d calls with no I/O; it ended %s.",
			times(s.Opened), when, Dur(s.FirstOpen), s.N(observe.OutcomeBreakerOpen), s.Status.Breaker))
	}
	if n := s.N(observe.OutcomeBulkheadFull); n > 0 {
		out = append(out, fmt.Sprintf("Its bulkhead (%d in flight) shed %d calls while the slots were taken.",
			s.Status.Capacity, n))
	}
	return out
}

// latencyLine gives the latency of the calls that succeeded and of those
// refused.
func latencyLine(s stats.Snap) string {
	lat := fmt.Sprintf("Calls that succeeded took p50 %s, p99 %s", Dur(s.SucceededP50), Dur(s.SucceededP99))
	if s.SucceededP99 == 0 {
		lat = "No call succeeded"
	}
	if s.RefusedTimed > 0 {
		lat += fmt.Sprintf("; refused calls failed fast, p99 %s", Dur(s.RefusedP99))
		if s.ReadTimeouts > 0 {
			lat += fmt.Sprintf(", where an attempt that reached it waited %s for nothing", Dur(s.ReadTimeout))
		}
	}
	return lat + "."
}
