package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// outbound check --file F validates a settings file laid over the
// environment, as the service reads it: a valid file passes, one bad
// variable of it fails the check naming it, and a route declared in it is
// checked like one of the environment.
func TestCheckFileValidatesTheSettingsFileAsTheServiceReadsIt(t *testing.T) {
	cleanEnv(t, config.SystemsVar, "payments", "PAYMENTS_BASE_URL", "https://pay.internal/v1")
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("PAYMENTS_RETRIES=0\nPAYMENTS_ROUTES=charges\nPAYMENTS_ROUTE_CHARGES_MATCH=POST /v1/charges\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("PAYMENTS_RETRIES=0\nPAYMENTS_ROUTES=charges\nPAYMENTS_ROUTE_CHARGES_MATCH=POST /v1/charges\nPAYMENTS_ROUTE_CHARGES_RETRYS=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runOut(t, "check", "--file", good); code != 0 {
		t.Errorf("good file: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runOut(t, "check", "--file", bad)
	if code != 1 || !strings.Contains(out+errOut, "PAYMENTS_ROUTE_CHARGES_RETRYS") || !strings.Contains(out+errOut, "did you mean PAYMENTS_ROUTE_CHARGES_RETRIES") {
		t.Errorf("bad file: exit %d, want 1 naming the typo:\n%s%s", code, out, errOut)
	}
	// Without --file, the check reads OUTBOUND_CONFIG_FILE as the service does.
	t.Setenv(config.FileVar, bad)
	if code, _, _ := runOut(t, "check"); code != 1 {
		t.Errorf("OUTBOUND_CONFIG_FILE set to the bad file: exit %d, want 1", code)
	}
	if code, _, errOut := runOut(t, "check", "--file", filepath.Join(dir, "missing")); code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("missing file: exit %d, %s", code, errOut)
	}
}
