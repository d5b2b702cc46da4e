package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed client certificate valid until notAfter
// and its key to dir, and returns their paths.
func writeCert(t *testing.T, dir string, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "payments-client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A client certificate that expires within 14 days is a warning: check
// prints it and still exits 0.
func TestCheckWarnsOnExpiringCertificate(t *testing.T) {
	cert, key := writeCert(t, t.TempDir(), time.Now().Add(5*24*time.Hour))
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
