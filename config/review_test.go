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
