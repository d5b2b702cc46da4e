package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/checkcmd"
)

// TestCheckFaultGuard: fault variables without OUTBOUND_FAULTS=on fail
// `outbound check` (exit 1) with a problem naming each; with the guard
// on, check passes and says loudly which systems inject what.
func TestCheckFaultGuard(t *testing.T) {
	const off = "fault injection is off: set OUTBOUND_FAULTS=on to allow it"
	drill := append(append([]string(nil), goodEnv...),
		"PAYMENTS_FAULT_ABORT_RATIO", "0.1",
		"INVENTORY_FAULT_DELAY", "2s", "INVENTORY_FAULT_DELAY_RATIO", "0.5")

	cleanEnv(t, drill...)
	t.Setenv(config.FaultsVar, "")
	code, out, errOut := runOut(t, "check")
	t.Logf("outbound check, guard off (exit %d):\n%s", code, out)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d: %s", code, exitInvalid, errOut)
	}
	for _, v := range []string{"PAYMENTS_FAULT_ABORT_RATIO=0.1: ", "INVENTORY_FAULT_DELAY=2s: ", "INVENTORY_FAULT_DELAY_RATIO=0.5: "} {
		if !strings.Contains(out, v+off) {
			t.Errorf("output does not name %s with %q:\n%s", strings.TrimSuffix(v, ": "), off, out)
		}
	}
	if strings.Contains(out, "FAULT INJECTION ON") {
		t.Errorf("guard off, yet the output says injection is on:\n%s", out)
	}

	t.Setenv(config.FaultsVar, "on")
	code, out, errOut = runOut(t, "check")
	t.Logf("outbound check, OUTBOUND_FAULTS=on (exit %d):\n%s", code, out)
	if code != exitOK {
		t.Fatalf("exit %d, want 0: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"     FAULT INJECTION ON (drill): aborts 10% of attempts with 503\n",
		"     FAULT INJECTION ON (drill): delays 50% of attempts by 2s\n",
		"2 systems, 0 problems, FAULT INJECTION ON for 2 systems (OUTBOUND_FAULTS=on)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runOut(t, "check", "--json")
	var rep checkcmd.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK {
		t.Fatalf("check --json: exit %d, %v", code, err)
	}
	if rep.Systems[0].Faults != "aborts 10% of attempts with 503" || rep.Systems[1].Faults != "delays 50% of attempts by 2s" {
		t.Errorf("check --json faults: %q, %q", rep.Systems[0].Faults, rep.Systems[1].Faults)
	}
}
