package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/redact"
)

// checkReport is the JSON form of `outbound check --json`.
type checkReport struct {
	Valid    bool             `json:"valid"`
	Systems  []checkSystem    `json:"systems"`
	Problems []config.Problem `json:"problems"`
	// Warnings do not make the configuration invalid: a client
	// certificate that expires within 14 days, for example.
	Warnings []config.Problem `json:"warnings"`
}

type checkSystem struct {
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

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", "[--system NAME]... [--json]",
		"Loads every declared system from the environment and prints one line per\n"+
			"system (ok or FAIL, with its main settings, secrets redacted) and the\n"+
			"variables under its prefix that are not outbound's (names only), then\n"+
			"every problem, one per line. Exit 0 when valid, 1 when not, 2 when no system is\n"+
			"declared.", stderr)
	var systems systemFlag
	fs.Var(&systems, "system", "declare system `NAME` in addition to "+systemsVar+" (repeatable, or comma separated)")
	asJSON := fs.Bool("json", false, "print one JSON object: {valid, systems: [{name, prefix, ok, vars}], problems}")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !declared(systems) {
		fmt.Fprintln(stderr, "outbound check: "+noSystems)
		return exitUsage
	}

	loaded, probs, err := load(systems)
	if err != nil {
		fmt.Fprintf(stderr, "outbound check: %v\n", err)
		return exitInvalid
	}
	failed := make(map[string]bool)
	for _, p := range probs {
		if p.System != "" {
			failed[p.System] = true
		}
	}
	code := exitOK
	if len(probs) > 0 {
		code = exitInvalid
	}
	warnings := []config.Problem{}
	for _, l := range loaded {
		warnings = append(warnings, l.Warnings()...)
	}

	if *asJSON {
		r := checkReport{
			Valid:    len(probs) == 0,
			Systems:  make([]checkSystem, 0, len(loaded)),
			Problems: probs,
			Warnings: warnings,
		}
		if r.Problems == nil {
			r.Problems = []config.Problem{}
		}
		for _, l := range loaded {
			r.Systems = append(r.Systems, checkSystem{
				Name: l.Name, Prefix: l.Prefix, OK: !failed[l.Name], Vars: l.Vars(), Ignored: l.Ignored(),
				Faults: injects(l),
			})
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false) // URLs keep their & and <>
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(stderr, "outbound check: %v\n", err)
			return exitInvalid
		}
		return code
	}

	for _, l := range loaded {
		marker := "ok   "
		if failed[l.Name] {
			marker = "FAIL "
		}
		fmt.Fprintln(stdout, marker+l.Summary())
		if ign := l.Ignored(); len(ign) > 0 {
			for i, k := range ign {
				ign[i] = redact.Printable(k)
			}
			fmt.Fprintf(stdout, "     not outbound's, ignored: %s\n", strings.Join(ign, ", "))
		}
		if f := injects(l); f != "" {
			fmt.Fprintf(stdout, "     FAULT INJECTION ON (drill): %s\n", f)
		}
	}
	for _, p := range probs {
		fmt.Fprintln(stdout, "  "+p.Error())
	}
	for _, w := range warnings {
		fmt.Fprintln(stdout, "  warning: "+w.Error())
	}
	summary := plural(len(loaded), "system") + ", " + plural(len(probs), "problem")
	if n := drills(loaded); n > 0 {
		summary += ", FAULT INJECTION ON for " + plural(n, "system") + " (" + config.FaultsVar + "=on)"
	}
	if len(warnings) > 0 {
		summary += ", " + plural(len(warnings), "warning")
	}
	fmt.Fprintln(stdout, summary)
	return code
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
