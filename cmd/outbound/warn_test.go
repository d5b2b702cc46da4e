package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
)

// A client certificate that expires within 14 days is a warning: check
// prints it and still exits 0.
func TestCheckWarnsOnExpiringCertificate(t *testing.T) {
	// A self-signed client certificate valid for 5 more days, its key in
	// SEC 1 form ("EC PRIVATE KEY").
	dir := t.TempDir()
	certPEM, keyPEM := testutil.SelfSigned(t, testutil.Leaf{
		CN:       "payments-client",
		Serial:   7,
		NotAfter: time.Now().Add(5 * 24 * time.Hour),
		SEC1:     true,
	})
	cert := testutil.WriteFile(t, dir, "client.crt", certPEM)
	key := testutil.WriteFile(t, dir, "client.key", keyPEM)
	cleanEnv(t, "OUTBOUND_SYSTEMS", "payments",
		"PAYMENTS_BASE_URL", "https://pay.internal/v1",
		"PAYMENTS_TLS_CERT_FILE", cert, "PAYMENTS_TLS_KEY_FILE", key)

	code, out, errOut := runOut(t, "check")
	if code != exitOK {
		t.Fatalf("exit %d, want %d (a warning is not a failure)\n%s%s", code, exitOK, out, errOut)
	}
	if !strings.Contains(out, "warning: PAYMENTS_TLS_CERT_FILE=") || !strings.Contains(out, "expires") {
		t.Errorf("no expiry warning naming PAYMENTS_TLS_CERT_FILE:\n%s", out)
	}
	if !strings.Contains(out, "1 warning") {
		t.Errorf("summary does not count the warning:\n%s", out)
	}

	code, out, _ = runOut(t, "check", "--json")
	var r checkReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if code != exitOK || !r.Valid || len(r.Warnings) != 1 || r.Warnings[0].Var != "PAYMENTS_TLS_CERT_FILE" {
		t.Errorf("--json: exit %d, valid %v, warnings %+v", code, r.Valid, r.Warnings)
	}
}
