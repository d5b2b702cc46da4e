package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// Only Load makes a valid Loaded; a system with a problem is not valid.
func TestLoadedValid(t *testing.T) {
	if (config.Loaded{Name: "x", Client: config.Baseline()}).Valid() {
		t.Error("a Loaded built by hand is valid")
	}
	setEnv(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments,inventory", "PAYMENTS_BASE_URL": goodURL, "INVENTORY_BASE_URL": "ftp://x",
	})
	ls, err := config.Load()
	if err == nil || len(ls) != 2 {
		t.Fatalf("Load: %d systems, err %v", len(ls), err)
	}
	if !ls[0].Valid() || ls[1].Valid() {
		t.Errorf("valid: payments %v (want true), inventory %v (want false)", ls[0].Valid(), ls[1].Valid())
	}
}

// LoadCode ignores the environment: neither OUTBOUND_SYSTEMS nor the
// system's variables nor typos under its prefix count.
func TestLoadCodeIgnoresEnvironment(t *testing.T) {
	setEnv(t, map[string]string{
		"OUTBOUND_SYSTEMS":        "inventory",
		"PAYMENTS_READ_TIMEOUT":   "abc",
		"PAYMENTS_CONECT_TIMEOUT": "1s",
	})
	ls, err := config.LoadCode(config.System{Name: "payments", Defaults: config.Client{BaseURL: goodURL}})
	if err != nil || len(ls) != 1 || !ls[0].Valid() || ls[0].Client.ReadTimeout != config.Baseline().ReadTimeout {
		t.Fatalf("LoadCode: %+v, %v; want payments alone, valid, at the baseline", ls, err)
	}
	if _, err := config.LoadCode(config.System{Name: "payments"}); err == nil {
		t.Error("LoadCode accepted a system without BASE_URL")
	}
}

// A problem shows the value as the operator typed it, not re-formatted.
func TestProblemShowsValueAsTyped(t *testing.T) {
	setEnv(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": goodURL, "PAYMENTS_READ_TIMEOUT": "70s",
	})
	_, err := config.Load()
	if err == nil || !strings.Contains(err.Error(), "PAYMENTS_READ_TIMEOUT=70s: must be <= 60s") {
		t.Fatalf("got %v, want the value as typed (70s)", err)
	}
}

// Valid holds only for what Load validated: a problem with the list of
// systems invalidates them all, and so does editing the settings after.
func TestLoadedValidStrict(t *testing.T) {
	setEnv(t, map[string]string{"OUTBOUND_SYSTEMS": "payments,Inventory", "PAYMENTS_BASE_URL": goodURL})
	ls, err := config.Load()
	if err == nil || len(ls) != 1 || ls[0].Valid() {
		t.Fatalf("with a bad name in OUTBOUND_SYSTEMS: %d systems, valid %v, err %v; want payments loaded but not valid", len(ls), len(ls) == 1 && ls[0].Valid(), err)
	}
	setEnv(t, map[string]string{"OUTBOUND_SYSTEMS": "payments"})
	ls, err = config.Load()
	if err != nil || !ls[0].Valid() {
		t.Fatalf("good env: valid %v, err %v", ls[0].Valid(), err)
	}
	ls[0].Client.CallTimeout = 0
	if ls[0].Valid() {
		t.Error("settings edited after Load are still valid")
	}
}

// Revalidate makes settings edited in code valid again, or reports them.
func TestRevalidate(t *testing.T) {
	setEnv(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": goodURL})
	ls, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	l.Client.BaseURL = "http://127.0.0.1:9/v2"
	if l.Valid() {
		t.Fatal("edited settings valid before Revalidate")
	}
	l, err = config.Revalidate(l)
	if err != nil || !l.Valid() {
		t.Fatalf("Revalidate of good edited settings: valid %v, err %v", l.Valid(), err)
	}
	l.Client.CallTimeout = 0
	if _, err := config.Revalidate(l); err == nil || !strings.Contains(err.Error(), "PAYMENTS_CALL_TIMEOUT") {
		t.Fatalf("Revalidate of a zero CALL_TIMEOUT: %v, want a problem naming PAYMENTS_CALL_TIMEOUT", err)
	}
	if _, err := config.Revalidate(config.Loaded{Name: "x", Client: config.Baseline()}); err == nil {
		t.Fatal("Revalidate accepted settings Load never saw")
	}
}

// Load is LoadEnv of the process environment: one code path reads values.
func TestLoadIsLoadEnvOfTheProcess(t *testing.T) {
	env := map[string]string{
		"OUTBOUND_SYSTEMS":        "payments,inventory",
		"PAYMENTS_BASE_URL":       goodURL,
		"PAYMENTS_READ_TIMEOUT":   "1ns",
		"PAYMENTS_CONECT_TIMEOUT": "1s",
		"PAYMENTS_API_KEY":        "k",
		"INVENTORY_BASE_URL":      "ftp://x",
	}
	setEnv(t, env)
	ls1, err1 := config.Load()
	ls2, err2 := config.LoadEnv(env)
	if fmt.Sprint(err1) != fmt.Sprint(err2) {
		t.Errorf("Load: %v\nLoadEnv: %v", err1, err2)
	}
	if len(ls1) != 2 || len(ls2) != 2 {
		t.Fatalf("loaded %d and %d systems", len(ls1), len(ls2))
	}
	for i := range ls1 {
		if ls1[i].Client != ls2[i].Client || fmt.Sprint(ls1[i].Ignored()) != fmt.Sprint(ls2[i].Ignored()) {
			t.Errorf("%s: Load %+v %v, LoadEnv %+v %v", ls1[i].Name, ls1[i].Client, ls1[i].Ignored(), ls2[i].Client, ls2[i].Ignored())
		}
	}
}

// TestVarsShowTheValueAsGiven: a variable that did not parse is shown as
// given, not as the default it left in place, in Vars (and so in `outbound
// check --json`) and in the summary line; an empty value is shown empty.
func TestVarsShowTheValueAsGiven(t *testing.T) {
	t.Parallel()
	ls, err := config.LoadEnv(map[string]string{
		"PAYMENTS_BASE_URL":        "https://u:s3cret@pay.internal/v1",
		"PAYMENTS_READ_TIMEOUT":    "abc",
		"PAYMENTS_MAX_CONCURRENT":  "lots",
		"PAYMENTS_CONNECT_TIMEOUT": "",
		"PAYMENTS_RETRIES":         "1",
	}, config.System{Name: "payments"})
	if err == nil || len(ls) != 1 {
		t.Fatalf("LoadEnv: %d systems, err %v; want payments with problems", len(ls), err)
	}
	got := map[string]config.Var{}
	for _, v := range ls[0].Vars() {
		got[v.Name] = v
	}
	for name, want := range map[string]string{
		"PAYMENTS_BASE_URL":        "https://REDACTED@pay.internal/v1",
		"PAYMENTS_READ_TIMEOUT":    "abc",
		"PAYMENTS_MAX_CONCURRENT":  "lots",
		"PAYMENTS_CONNECT_TIMEOUT": "",
		"PAYMENTS_RETRIES":         "1",
		"PAYMENTS_CALL_TIMEOUT":    "15s",
	} {
		if v := got[name]; v.Value != want {
			t.Errorf("Vars %s = %q (source %s), want %q", name, v.Value, v.Source, want)
		}
	}
	if s := ls[0].Summary(); !strings.Contains(s, " read=abc ") || !strings.Contains(s, " max_concurrent=lots ") || !strings.Contains(s, " connect= ") {
		t.Errorf("Summary() = %q, want read=abc, max_concurrent=lots and connect= (as given)", s)
	}
}

// TestNoSystemDeclaredIsAProblem: with OUTBOUND_SYSTEMS unset and no
// system declared in code, a load used to succeed with nothing in it, and
// a service then called a client that did not exist. It is a problem now,
// on OUTBOUND_SYSTEMS, that names the BASE_URL variables of the systems
// the environment seems to mean.
func TestNoSystemDeclaredIsAProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // the whole Problem.Error()
	}{
		{"one base url", map[string]string{"INVENTORY_BASE_URL": "http://inventory.internal", "INVENTORY_RETRIES": "1"},
			`OUTBOUND_SYSTEMS (unset): no system declared: set OUTBOUND_SYSTEMS=inventory or declare config.System{Name: "inventory"} in code; found INVENTORY_BASE_URL`},
		{"two base urls", map[string]string{"PAYMENTS_BASE_URL": goodURL, "ORDER_HISTORY_BASE_URL": "http://oh", "OUTBOUND_BASE_URL": "x", "lower_BASE_URL": "x", "_BASE_URL": "x"},
			`OUTBOUND_SYSTEMS (unset): no system declared: set OUTBOUND_SYSTEMS=order-history,payments or declare each in code (config.System{Name: "order-history"}); found ORDER_HISTORY_BASE_URL, PAYMENTS_BASE_URL`},
		{"nothing", map[string]string{"HOME": "/root"},
			`OUTBOUND_SYSTEMS (unset): no system declared: set OUTBOUND_SYSTEMS (e.g. OUTBOUND_SYSTEMS=payments,inventory) or declare a config.System in code, and give each system its <SYSTEM>_BASE_URL`},
		{"empty list", map[string]string{config.SystemsVar: " ", "INVENTORY_BASE_URL": "http://inventory.internal"},
			`OUTBOUND_SYSTEMS=: no system declared: set OUTBOUND_SYSTEMS=inventory or declare config.System{Name: "inventory"} in code; found INVENTORY_BASE_URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ls, err := config.LoadEnv(tc.env)
			probs := problemsOf(t, err)
			if len(ls) != 0 || len(probs) != 1 || probs[0].Error() != tc.want {
				t.Fatalf("LoadEnv: %d systems, problems:%s\nwant:\n\t%s", len(ls), dump(probs), tc.want)
			}
		})
	}
	// A list whose every entry is bad is reported entry by entry, once.
	_, err := config.LoadEnv(map[string]string{config.SystemsVar: "Bad"})
	if probs := problemsOf(t, err); len(probs) != 1 || !strings.Contains(probs[0].Rule, `entry "Bad"`) {
		t.Errorf("OUTBOUND_SYSTEMS=Bad:%s\nwant the bad entry alone", dump(probs))
	}
	// LoadCode reads no environment: it says to declare a system in code.
	_, err = config.LoadCode()
	if probs := problemsOf(t, err); len(probs) != 1 || !strings.Contains(probs[0].Rule, "no system declared: pass at least one config.System") {
		t.Errorf("LoadCode():%s", dump(probs))
	}
}
