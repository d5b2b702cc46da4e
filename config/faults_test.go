package config_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
)

// problemVars returns the variables err's problems name, sorted, and
// fails unless each has the given rule.
func problemVars(t *testing.T, err error, rule string) []string {
	t.Helper()
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *config.Error", err)
	}
	var vars []string
	for _, p := range ce.Problems {
		if p.Rule != rule {
			t.Errorf("%s: rule %q, want %q", p.Var, p.Rule, rule)
		}
		vars = append(vars, p.Var)
	}
	slices.Sort(vars)
	return vars
}

// TestFaultGuard: any fault setting set without OUTBOUND_FAULTS=on, in
// the environment or in code, is a problem naming it; with the guard on
// the same settings load.
func TestFaultGuard(t *testing.T) {
	t.Parallel()
	const off = "fault injection is off: set OUTBOUND_FAULTS=on to allow it"
	d := config.Baseline()
	d.FaultDelay = time.Second // a code default is guarded too
	systems := []config.System{{Name: "payments"}, {Name: "inventory", Defaults: d}}
	env := map[string]string{
		"PAYMENTS_BASE_URL":           "http://payments.internal",
		"PAYMENTS_FAULT_ABORT_RATIO":  "0.1",
		"PAYMENTS_FAULT_ABORT_STATUS": "503", // set, even to the baseline
		"INVENTORY_BASE_URL":          "http://inventory.internal",
		"INVENTORY_FAULT_DELAY_RATIO": "0.5",
	}
	for _, guard := range []string{"", "off"} {
		e := maps.Clone(env)
		if guard != "" {
			e[config.FaultsVar] = guard
		}
		_, err := config.LoadEnv(e, systems...)
		want := []string{"INVENTORY_FAULT_DELAY", "INVENTORY_FAULT_DELAY_RATIO", "PAYMENTS_FAULT_ABORT_RATIO", "PAYMENTS_FAULT_ABORT_STATUS"}
		if got := problemVars(t, err, off); !slices.Equal(got, want) {
			t.Errorf("OUTBOUND_FAULTS=%q: problems on %v, want %v", guard, got, want)
		}
		if !strings.Contains(err.Error(), "INVENTORY_FAULT_DELAY=1s (code default): "+off) {
			t.Errorf("report does not name the code default:\n%v", err)
		}
	}

	e := maps.Clone(env)
	e[config.FaultsVar] = "on"
	ls, err := config.LoadEnv(e, systems...)
	if err != nil {
		t.Fatalf("OUTBOUND_FAULTS=on: %v", err)
	}
	if !ls[0].FaultsAllowed() || !ls[0].Valid() {
		t.Errorf("payments: FaultsAllowed %v, Valid %v", ls[0].FaultsAllowed(), ls[0].Valid())
	}
	if got, want := ls[0].Client.Faults(), "aborts 10% of attempts with 503"; got != want {
		t.Errorf("payments Faults() = %q, want %q", got, want)
	}
	if got, want := ls[1].Client.Faults(), "delays 50% of attempts by 1s"; got != want {
		t.Errorf("inventory Faults() = %q, want %q", got, want)
	}

	// Revalidate keeps the guard: code cannot switch faults on after a
	// load that did not allow them.
	ls, err = config.LoadEnv(map[string]string{"PAYMENTS_BASE_URL": "http://payments.internal"}, systems[0])
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	l.Client.FaultAbortRatio = 1
	if _, err := config.Revalidate(l); !slices.Equal(problemVars(t, err, off), []string{"PAYMENTS_FAULT_ABORT_RATIO"}) {
		t.Errorf("Revalidate let a fault through: %v", err)
	}
}

// TestFaultsVarAndRules: OUTBOUND_FAULTS is on or off, and the fault
// settings have their ranges.
func TestFaultsVarAndRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, value, rule string }{
		{config.FaultsVar, "true", "must be on or off (unset: off); on allows the <SYSTEM>_FAULT_* drills"},
		{"PAYMENTS_FAULT_ABORT_RATIO", "1.5", "must be <= 1"},
		{"PAYMENTS_FAULT_ABORT_RATIO", "-0.1", "must be >= 0"},
		{"PAYMENTS_FAULT_ABORT_STATUS", "200", "must be between 400 and 599"},
		{"PAYMENTS_FAULT_DELAY", "-1s", "must be >= 0"},
		{"PAYMENTS_FAULT_DELAY", "11m", "must be <= 10m"},
		{"PAYMENTS_FAULT_DELAY_RATIO", "2", "must be <= 1"},
	} {
		env := map[string]string{"PAYMENTS_BASE_URL": "http://payments.internal", config.FaultsVar: "on", tc.key: tc.value}
		_, err := config.LoadEnv(env, config.System{Name: "payments"})
		if got := problemVars(t, err, tc.rule); !slices.Equal(got, []string{tc.key}) {
			t.Errorf("%s=%s: problems on %v", tc.key, tc.value, got)
		}
	}
}

// TestFaultsText: how a ratio reads.
func TestFaultsText(t *testing.T) {
	t.Parallel()
	c := config.Baseline()
	if got := c.Faults(); got != "" {
		t.Errorf("baseline Faults() = %q, want none", got)
	}
	c.FaultDelayRatio = 0.5 // no delay: nothing injected
	if got := c.Faults(); got != "" {
		t.Errorf("ratio without delay: Faults() = %q, want none", got)
	}
	c.FaultAbortRatio, c.FaultAbortStatus, c.FaultDelay, c.FaultDelayRatio = 0.07, 429, 2*time.Second, 0.005
	if got, want := c.Faults(), "aborts 7% of attempts with 429; delays 0.5% of attempts by 2s"; got != want {
		t.Errorf("Faults() = %q, want %q", got, want)
	}
}
