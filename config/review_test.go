package config_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// Kubernetes injects service-link variables for every Service of the
// namespace; a Service named "payments-db" next to system "payments" must
// not stop the pod.
func TestServiceLinksOfOtherServicesIgnored(t *testing.T) {
	setEnv(t, map[string]string{
		"OUTBOUND_SYSTEMS":                    "payments",
		"PAYMENTS_BASE_URL":                   goodURL,
		"PAYMENTS_DB_SERVICE_HOST":            "10.0.0.9",
		"PAYMENTS_DB_SERVICE_PORT":            "5432",
		"PAYMENTS_DB_PORT":                    "tcp://10.0.0.9:5432",
		"PAYMENTS_DB_PORT_5432_TCP_ADDR":      "10.0.0.9",
		"PAYMENTS_API_V2_SERVICE_PORT_GRPC":   "9000",
		"PAYMENTS_API_V2_PORT_9000_TCP_PROTO": "tcp",
	})
	if _, err := config.Load(); err != nil {
		t.Fatalf("service-link variables of other Services reported: %v", err)
	}
}

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

// Printing or logging a Client never shows the credentials of BASE_URL.
func TestClientStringRedacts(t *testing.T) {
	c := config.Baseline()
	c.BaseURL = "https://user:s3cret@pay.internal/v1?token=abc"
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("cfg", "client", c)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), c.String(), b.String()} {
		if strings.Contains(out, "s3cret") || strings.Contains(out, "abc") || !strings.Contains(out, "pay.internal") {
			t.Errorf("not redacted: %s", out)
		}
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

// A Loaded, printed or logged, never shows the credentials of BASE_URL,
// even though it keeps the environment's text for its problems.
func TestLoadedPrintRedacts(t *testing.T) {
	setEnv(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": "https://tok:s3cret@pay.internal/v1?api_key=K3Y",
	})
	ls, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("sys", "loaded", ls[0], "client", ls[0].Client)
	for _, out := range []string{fmt.Sprintf("%v", ls[0]), fmt.Sprintf("%+v", ls[0]), fmt.Sprintf("%#v", ls[0].Client), b.String()} {
		if strings.Contains(out, "s3cret") || strings.Contains(out, "K3Y") || strings.Contains(out, "tok:") {
			t.Errorf("not redacted: %s", out)
		}
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
