package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/checkcmd"
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
	var r checkcmd.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if code != exitOK || !r.Valid || len(r.Warnings) != 1 || r.Warnings[0].Var != "PAYMENTS_TLS_CERT_FILE" {
		t.Errorf("--json: exit %d, valid %v, warnings %+v", code, r.Valid, r.Warnings)
	}
}

// An unreachable fleet Redis is a warning, not a problem:
// pods start and run local. The password never shows.
func TestCheckWarnsOnUnreachableFleetRedis(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	cleanEnv(t, "OUTBOUND_SYSTEMS", "payments",
		"PAYMENTS_BASE_URL", "https://pay.internal/v1", "PAYMENTS_BREAKER_SCOPE", "fleet",
		"OUTBOUND_FLEET_REDIS_URL", "redis://:hunter2@"+addr, "OUTBOUND_FLEET_NAMESPACE", "checkout")
	code, out, errOut := runOut(t, "check")
	if code != exitOK {
		t.Fatalf("exit %d, want %d (an unreachable Redis is not a config error)\n%s%s", code, exitOK, out, errOut)
	}
	if !strings.Contains(out, "warning: OUTBOUND_FLEET_REDIS_URL=redis://REDACTED@") || !strings.Contains(out, "run every breaker local") {
		t.Errorf("no warning about the fleet's Redis:\n%s", out)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("the password shows:\n%s", out)
	}
}
