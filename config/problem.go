package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/outbound-go/outbound/internal/redact"
)

// ErrInvalid matches every [*Error] with errors.Is.
var ErrInvalid = errors.New("outbound config: invalid")

// Problem is one thing wrong with the configuration.
type Problem struct {
	// System is the system the problem belongs to; empty for problems
	// with the list of systems itself.
	System string `json:"system,omitempty"`
	// Var is the variable to fix (PAYMENTS_CALL_TIMEOUT), or "code" for a
	// system declared in code.
	Var string `json:"var"`
	// Value is the value it had, secrets redacted; empty when unset.
	Value string `json:"value"`
	// Source says where Value came from.
	Source Source `json:"-"`
	// Rule says, in plain words, what the value must be.
	Rule string `json:"rule"`
}

// Error renders the problem as VAR=value: rule. A name or value holding
// a control character (CR, LF, an ANSI escape) is shown Go-quoted, so no
// value can forge a line of the report.
func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(redact.Show(p.Var))
	switch {
	case p.Value != "":
		b.WriteByte('=')
		b.WriteString(redact.Show(p.Value))
		if p.Source != FromEnv && p.Var != "code" {
			fmt.Fprintf(&b, " (%s default)", p.Source)
		}
	case p.Source != FromEnv && p.Var != "code":
		b.WriteString(" (unset)")
	default:
		b.WriteString("=")
	}
	b.WriteString(": ")
	b.WriteString(p.Rule)
	return b.String()
}

// MarshalJSON renders the problem with its name and value cut as
// [Problem.Error] cuts them (redact.Clip): a huge value never makes a huge
// report.
func (p Problem) MarshalJSON() ([]byte, error) {
	type plain Problem // no methods: no recursion
	q := plain(p)
	q.Var, q.Value = redact.Clip(q.Var), redact.Clip(q.Value)
	return json.Marshal(q)
}

// Error is every problem found by [Load], across all fields of all
// systems. Use errors.As to list them; errors.Is(err, ErrInvalid) holds.
type Error struct {
	Problems []Problem
}

// Error lists every problem, one per line.
func (e *Error) Error() string {
	var b strings.Builder
	noun := "problems"
	if len(e.Problems) == 1 {
		noun = "problem"
	}
	fmt.Fprintf(&b, "outbound config: %d %s", len(e.Problems), noun)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Is reports whether target is [ErrInvalid].
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns every problem as an error.
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}
