package checkcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/redact"
)

// Report is the JSON form of the check (--json).
type Report struct {
	Valid    bool             `json:"valid"`
	Systems  []System         `json:"systems"`
	Problems []config.Problem `json:"problems"`
	// Warnings do not make the configuration invalid: a client
	// certificate that expires within 14 days, for example.
	Warnings []config.Problem `json:"warnings"`
	// Note qualifies the report: `outbound check` says that it does not
	// know the defaults a service declares in code. Absent otherwise.
	Note string `json:"note,omitempty"`
}

// System is one system of a [Report].
type System struct {
	Name   string       `json:"name"`
	Prefix string       `json:"prefix"`
	OK     bool         `json:"ok"`
	Vars   []config.Var `json:"vars"`
	// Ignored names the variables under the prefix that are not
	// outbound's (an SDK's STRIPE_SECRET_KEY); values are never shown.
	Ignored []string `json:"ignored,omitempty"`
	// Faults says what fault injection does to the system's attempts
	// (drills, OUTBOUND_FAULTS=on); absent when none.
	Faults string `json:"faults,omitempty"`
}

// result is what one check found.
type result struct {
	loaded   []config.Loaded
	probs    []config.Problem
	warnings []config.Problem
	failed   map[string]bool // by system name
	err      error           // not a *config.Error: the check could not run
}

// check loads the declared systems and collects problems and warnings.
func check(ctx context.Context, o *Options, flagged SystemFlag) *result {
	env := o.env()
	r := &result{failed: map[string]bool{}, warnings: []config.Problem{}}
	r.loaded, r.probs, r.err = Load(env, o.Systems, flagged)
	for _, p := range r.probs {
		if p.System != "" {
			r.failed[p.System] = true
		}
	}
	r.warnings = append(r.warnings, config.Warnings(r.loaded)...)
	r.warnings = append(r.warnings, fleetWarnings(ctx, env)...)
	return r
}

// code is the exit code of the result.
func (r *result) code() int {
	if r.err != nil || len(r.probs) > 0 {
		return ExitInvalid
	}
	return ExitValid
}

// writeJSON writes the report as one JSON object.
func (r *result) writeJSON(o *Options) int {
	if r.err != nil {
		fmt.Fprintf(o.Stderr, "%s: %v\n", o.Name, r.err)
		return ExitInvalid
	}
	rep := Report{
		Valid:    len(r.probs) == 0,
		Systems:  make([]System, 0, len(r.loaded)),
		Problems: r.probs,
		Warnings: r.warnings,
		Note:     o.Note,
	}
	if rep.Problems == nil {
		rep.Problems = []config.Problem{}
	}
	for _, l := range r.loaded {
		rep.Systems = append(rep.Systems, System{
			Name: l.Name, Prefix: l.Prefix, OK: !r.failed[l.Name], Vars: l.Vars(), Ignored: l.Ignored(),
			Faults: injects(l),
		})
	}
	enc := json.NewEncoder(o.Stdout)
	enc.SetEscapeHTML(false) // URLs keep their & and <>
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		fmt.Fprintf(o.Stderr, "%s: %v\n", o.Name, err)
		return ExitInvalid
	}
	return r.code()
}

// writeText writes one line per system, then every problem and warning,
// the note, and a summary line.
func (r *result) writeText(o *Options) int {
	if r.err != nil {
		fmt.Fprintf(o.Stderr, "%s: %v\n", o.Name, r.err)
		return ExitInvalid
	}
	w := o.Stdout
	for _, l := range r.loaded {
		marker := "ok   "
		if r.failed[l.Name] {
			marker = "FAIL "
		}
		fmt.Fprintln(w, marker+l.Summary())
		if ign := l.Ignored(); len(ign) > 0 {
			for i, k := range ign {
				ign[i] = redact.Show(k)
			}
			fmt.Fprintf(w, "     not outbound's, ignored: %s\n", strings.Join(ign, ", "))
		}
		if f := injects(l); f != "" {
			fmt.Fprintf(w, "     FAULT INJECTION ON (drill): %s\n", f)
		}
	}
	for _, p := range r.probs {
		fmt.Fprintln(w, "  "+p.Error())
	}
	for _, p := range r.warnings {
		fmt.Fprintln(w, "  warning: "+p.Error())
	}
	if o.Note != "" {
		fmt.Fprintln(w, "note: "+o.Note)
	}
	summary := plural(len(r.loaded), "system") + ", " + plural(len(r.probs), "problem")
	if n := drills(r.loaded); n > 0 {
		summary += ", FAULT INJECTION ON for " + plural(n, "system") + " (" + config.FaultsVar + "=on)"
	}
	if len(r.warnings) > 0 {
		summary += ", " + plural(len(r.warnings), "warning")
	}
	fmt.Fprintln(w, summary)
	return r.code()
}

// injects says what faults l injects: "" unless OUTBOUND_FAULTS=on and
// its FAULT_* settings inject some.
func injects(l config.Loaded) string {
	if !l.FaultsAllowed() {
		return ""
	}
	return l.Client.Faults()
}

// drills counts the systems that inject faults.
func drills(loaded []config.Loaded) int {
	n := 0
	for _, l := range loaded {
		if injects(l) != "" {
			n++
		}
	}
	return n
}

// plural returns "1 system", "2 systems".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
