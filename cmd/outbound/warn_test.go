package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/checkcmd"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/registry"
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

// A fleet Redis that no system uses, and a scope set without a system's
// prefix, do nothing: the check warns (and still exits 0), and a registry
// started with a logger logs the same warnings.
func TestUnusedFleetSettingsAreWarnedOf(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // something answers: only the warnings under test
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"a Redis no system uses", []string{"OUTBOUND_FLEET_REDIS_URL", "redis://:hunter2@" + l.Addr().String(), "OUTBOUND_FLEET_NAMESPACE", "checkout"},
			[]string{"OUTBOUND_FLEET_REDIS_URL=redis://REDACTED@" + l.Addr().String() + ": no system is at BREAKER_SCOPE=fleet or RATE_SCOPE=fleet"}},
		{"unprefixed scopes", []string{"BREAKER_SCOPE", "fleet", "RATE_SCOPE", "fleet"},
			[]string{"BREAKER_SCOPE=fleet: no system reads it: a system's scope is set under its prefix (PAYMENTS_BREAKER_SCOPE)",
				"RATE_SCOPE=fleet: no system reads it: a system's scope is set under its prefix (PAYMENTS_RATE_SCOPE)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t, append([]string{"OUTBOUND_SYSTEMS", "payments", "PAYMENTS_BASE_URL", "https://pay.internal/v1"}, tc.env...)...)
			code, out, errOut := runOut(t, "check")
			if code != exitOK {
				t.Fatalf("exit %d, want %d (a warning is not a failure)\n%s%s", code, exitOK, out, errOut)
			}
			var logs bytes.Buffer
			reg, err := registry.FromEnvWith(nil, registry.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			reg.Close()
			for _, w := range tc.want {
				if !strings.Contains(out, "  warning: "+w) {
					t.Errorf("the check does not warn %q:\n%s", w, out)
				}
				if !strings.Contains(logs.String(), w) {
					t.Errorf("the registry does not log %q:\n%s", w, logs.String())
				}
			}
			if strings.Contains(out+logs.String(), "hunter2") {
				t.Errorf("the password shows:\n%s%s", out, logs.String())
			}
		})
	}
}
