package config

// Internal tests: checkTLSFiles takes the time as a parameter, so expiry is
// tested at chosen instants; Load itself is tested with certificates made
// relative to the real clock. Certificates and keys are generated at run
// time (internal/testutil) and written to t.TempDir(); none are checked in. TestMain (with goleak) is in
// config_test.go.

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
)

// tlsCheckPair writes a client certificate of ca named name, valid from nb
// to na, and its key to dir as name.crt and name.key, and returns their
// paths.
func tlsCheckPair(t *testing.T, ca *testutil.CA, dir, name string, nb, na time.Time) (certFile, keyFile string) {
	t.Helper()
	c, k := ca.Issue(t, testutil.Leaf{CN: name, NotBefore: nb, NotAfter: na})
	return testutil.WriteFile(t, dir, name+".crt", c), testutil.WriteFile(t, dir, name+".key", k)
}

func tlsCheckSetenv(t *testing.T, env map[string]string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
}

func tlsCheckFind(probs []Problem, v string) []Problem {
	var out []Problem
	for _, p := range probs {
		if p.Var == v {
			out = append(out, p)
		}
	}
	return out
}

func tlsCheckDump(probs []Problem) string {
	var b strings.Builder
	for _, p := range probs {
		b.WriteString("\n\t" + p.Error())
	}
	return b.String()
}

// TestTLSFilesInTheOneReport: every TLS file problem of every system comes
// in the same report as the other problems, each on its variable, with the
// file's path as the value.
func TestTLSFilesInTheOneReport(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "tlscheck test CA")
	now := time.Now()

	// payments: the CA file is missing; the certificate expired; the key
	// is another certificate's.
	expiredCert, _ := tlsCheckPair(t, ca, dir, "expired", now.Add(-60*24*time.Hour), now.Add(-48*time.Hour))
	_, otherKey := tlsCheckPair(t, ca, dir, "other", now.Add(-time.Hour), now.Add(90*24*time.Hour))
	missing := filepath.Join(dir, "no-such-ca.pem")

	// inventory: the CA file is garbage; the key file holds a certificate
	// (swapped files); CONNECT_TIMEOUT does not parse.
	garbage := testutil.WriteFile(t, dir, "garbage.pem", []byte("this is not PEM\n"))
	goodCert, _ := tlsCheckPair(t, ca, dir, "inventory", now.Add(-time.Hour), now.Add(90*24*time.Hour))

	// ledger: good files but an http BASE_URL; a CA "bundle" that holds a
	// private key; a CA file that is a directory.
	ledgerCert, ledgerKey := tlsCheckPair(t, ca, dir, "ledger", now.Add(-time.Hour), now.Add(90*24*time.Hour))

	// shipping: a cert file that is a certificate whose PEM body is
	// corrupt, and a key file that is not there.
	corrupt := testutil.WriteFile(t, dir, "corrupt.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")}))

	tlsCheckSetenv(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments,inventory,ledger,shipping",

		"PAYMENTS_BASE_URL":      "https://payments.internal",
		"PAYMENTS_TLS_CA_FILE":   missing,
		"PAYMENTS_TLS_CERT_FILE": expiredCert,
		"PAYMENTS_TLS_KEY_FILE":  otherKey,

		"INVENTORY_BASE_URL":        "https://inventory.internal",
		"INVENTORY_TLS_CA_FILE":     garbage,
		"INVENTORY_TLS_CERT_FILE":   goodCert,
		"INVENTORY_TLS_KEY_FILE":    goodCert,
		"INVENTORY_CONNECT_TIMEOUT": "2",

		"LEDGER_BASE_URL":      "http://ledger.internal",
		"LEDGER_TLS_CERT_FILE": ledgerCert,
		"LEDGER_TLS_KEY_FILE":  ledgerKey,
		"LEDGER_TLS_CA_FILE":   ledgerKey,

		"SHIPPING_BASE_URL":      "https://shipping.internal",
		"SHIPPING_TLS_CA_FILE":   dir,
		"SHIPPING_TLS_CERT_FILE": corrupt,
		"SHIPPING_TLS_KEY_FILE":  filepath.Join(dir, "nope.key"),
	})
	ls, err := Load()
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load: err = %v, want a *config.Error", err)
	}
	if len(ls) != 4 {
		t.Fatalf("Load returned %d systems, want 4", len(ls))
	}
	probs := ce.Problems
	t.Logf("the one report:\n%v", err)

	want := []struct {
		v, value, rule string
	}{
		{"PAYMENTS_TLS_CA_FILE", missing, "file does not exist"},
		{"PAYMENTS_TLS_CERT_FILE", expiredCert, `certificate "expired" expired on ` + formatDate(mustLeaf(t, expiredCert).NotAfter) + " (NotAfter)"},
		{"PAYMENTS_TLS_KEY_FILE", otherKey, "must be the private key of the certificate in PAYMENTS_TLS_CERT_FILE: the key does not match the certificate"},
		{"INVENTORY_TLS_CA_FILE", garbage, "holds no PEM certificate"},
		{"INVENTORY_TLS_KEY_FILE", goodCert, "holds a certificate, not a private key (are TLS_CERT_FILE and TLS_KEY_FILE swapped?)"},
		{"INVENTORY_CONNECT_TIMEOUT", "2", "a unit is missing"},
		{"LEDGER_TLS_CERT_FILE", ledgerCert, "a client certificate needs an https BASE_URL"},
		{"LEDGER_TLS_CA_FILE", ledgerKey, "holds a private key, not a PEM certificate"},
		{"SHIPPING_TLS_CA_FILE", dir, "is a directory"},
		{"SHIPPING_TLS_CERT_FILE", corrupt, "the certificate does not parse"},
		{"SHIPPING_TLS_KEY_FILE", filepath.Join(dir, "nope.key"), "file does not exist"},
	}
	for _, w := range want {
		got := tlsCheckFind(probs, w.v)
		if len(got) != 1 {
			t.Errorf("%d problems on %s, want 1:%s", len(got), w.v, tlsCheckDump(probs))
			continue
		}
		if got[0].Value != w.value || !strings.Contains(got[0].Rule, w.rule) {
			t.Errorf("%s: got %q, want value %q and a rule containing %q", w.v, got[0].Error(), w.value, w.rule)
		}
		if !strings.Contains(err.Error(), got[0].Error()) {
			t.Errorf("the report does not list %q", got[0].Error())
		}
	}
	if len(probs) != len(want) {
		t.Errorf("%d problems, want %d:%s", len(probs), len(want), tlsCheckDump(probs))
	}
	// No key material ever appears in the report.
	for _, f := range []string{otherKey, ledgerKey} {
		data, rerr := os.ReadFile(f)
		if rerr != nil {
			t.Fatal(rerr)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			if len(line) > 16 && strings.Contains(err.Error(), line) {
				t.Errorf("the report quotes the key file %s:\n%v", f, err)
			}
		}
	}
	if strings.Contains(err.Error(), "PRIVATE KEY-----") {
		t.Errorf("the report quotes PEM text:\n%v", err)
	}
}

func mustLeaf(t *testing.T, certFile string) *x509.Certificate {
	t.Helper()
	_, _, leaf, rule := readCertFile(certFile)
	if rule != "" {
		t.Fatalf("%s: %s", certFile, rule)
	}
	return leaf
}

// TestTLSFilesUnreadable: a file without read permission is named as such.
func TestTLSFilesUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	dir := t.TempDir()
	ca := testutil.NewCA(t, "tlscheck test CA")
	p := testutil.WriteFile(t, dir, "ca.pem", ca.PEM)
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	l := Loaded{Name: "payments", Prefix: "PAYMENTS", Client: Client{TLSCAFile: p}}
	probs, _, _ := checkTLSFiles(&l, nil, time.Now())
	if len(probs) != 1 || !strings.Contains(probs[0].Rule, "not readable (permission denied)") {
		t.Fatalf("got %s, want one problem: not readable", tlsCheckDump(probs))
	}
}

// TestTLSCertExpiringWarns: a certificate expiring in 5 days loads (no
// problem) and gives one warning with its date; at 20 days it gives none.
func TestTLSCertExpiringWarns(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "tlscheck test CA")
	now := time.Now()
	soonCert, soonKey := tlsCheckPair(t, ca, dir, "soon", now.Add(-time.Hour), now.Add(5*24*time.Hour))
	laterCert, laterKey := tlsCheckPair(t, ca, dir, "later", now.Add(-time.Hour), now.Add(20*24*time.Hour))
	caFile := testutil.WriteFile(t, dir, "ca.pem", ca.PEM)
	tlsCheckSetenv(t, map[string]string{
		"OUTBOUND_SYSTEMS":        "payments,inventory",
		"PAYMENTS_BASE_URL":       "https://payments.internal",
		"PAYMENTS_TLS_CA_FILE":    caFile,
		"PAYMENTS_TLS_CA_ONLY":    "true",
		"PAYMENTS_TLS_CERT_FILE":  soonCert,
		"PAYMENTS_TLS_KEY_FILE":   soonKey,
		"INVENTORY_BASE_URL":      "https://inventory.internal",
		"INVENTORY_TLS_CERT_FILE": laterCert,
		"INVENTORY_TLS_KEY_FILE":  laterKey,
	})
	ls, err := Load()
	if err != nil {
		t.Fatalf("Load: %v (a certificate expiring in 5 days is a warning, not a problem)", err)
	}
	w := ls[0].Warnings()
	if len(w) != 1 {
		t.Fatalf("payments: %d warnings, want 1:%s", len(w), tlsCheckDump(w))
	}
	date := formatDate(mustLeaf(t, soonCert).NotAfter)
	if w[0].Var != "PAYMENTS_TLS_CERT_FILE" || w[0].Value != soonCert ||
		!strings.Contains(w[0].Rule, "expires on "+date) || !strings.Contains(w[0].Rule, "in 5 days") {
		t.Errorf("warning = %q, want one on PAYMENTS_TLS_CERT_FILE with %s, in 5 days", w[0].Error(), date)
	}
	t.Logf("warning: %s", w[0].Error())
	if w := ls[1].Warnings(); len(w) != 0 {
		t.Errorf("inventory (20 days left): warnings %s, want none", tlsCheckDump(w))
	}
}

// TestTLSCertValidityAt walks one certificate's life with the now
// parameter: not yet valid, valid, close to expiry, expired.
func TestTLSCertValidityAt(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "tlscheck test CA")
	nb := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	na := nb.Add(90 * 24 * time.Hour) // 2030-04-01
	certFile, keyFile := tlsCheckPair(t, ca, dir, "client", nb, na)
	l := Loaded{Name: "payments", Prefix: "PAYMENTS", Client: Client{TLSCertFile: certFile, TLSKeyFile: keyFile}}

	cases := []struct {
		name      string
		now       time.Time
		wantProb  string
		wantWarn  string
		wantClean bool
	}{
		{"before NotBefore", nb.Add(-time.Minute), `certificate "client" is not valid before 2030-01-01 00:00:00 UTC (NotBefore)`, "", false},
		{"valid", nb.Add(24 * time.Hour), "", "", true},
		{"15 days left", na.Add(-15 * 24 * time.Hour), "", "", true},
		{"14 days left", na.Add(-14 * 24 * time.Hour), "", "expires on 2030-04-01 00:00:00 UTC (NotAfter, in 14 days)", false},
		{"30 hours left", na.Add(-30 * time.Hour), "", "(NotAfter, in 30h)", false},
		{"at NotAfter", na, "", "(NotAfter, in 0)", false},
		{"expired", na.Add(time.Second), `certificate "client" expired on 2030-04-01 00:00:00 UTC (NotAfter): renew it`, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			probs, warns, _ := checkTLSFiles(&l, nil, tc.now)
			switch {
			case tc.wantClean:
				if len(probs)+len(warns) != 0 {
					t.Errorf("problems %s warnings %s, want none", tlsCheckDump(probs), tlsCheckDump(warns))
				}
			case tc.wantProb != "":
				if len(probs) != 1 || len(warns) != 0 || probs[0].Var != "PAYMENTS_TLS_CERT_FILE" || !strings.Contains(probs[0].Rule, tc.wantProb) {
					t.Errorf("problems %s warnings %s, want one problem %q", tlsCheckDump(probs), tlsCheckDump(warns), tc.wantProb)
				}
			default:
				if len(warns) != 1 || len(probs) != 0 || !strings.Contains(warns[0].Rule, tc.wantWarn) {
					t.Errorf("problems %s warnings %s, want one warning %q", tlsCheckDump(probs), tlsCheckDump(warns), tc.wantWarn)
				}
			}
		})
	}
}

// TestTLSFilesSkipAndGood: fields named in skip are not checked; a good
// set of files gives nothing.
func TestTLSFilesSkipAndGood(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "tlscheck test CA")
	certFile, keyFile := tlsCheckPair(t, ca, dir, "client", time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour))
	bundle := append(append([]byte("# a comment before the bundle\n"), ca.PEM...), ca.PEM...)
	caFile := testutil.WriteFile(t, dir, "bundle.pem", bundle)

	good := Loaded{Name: "p", Prefix: "P", Client: Client{TLSCAFile: caFile, TLSCertFile: certFile, TLSKeyFile: keyFile}}
	if probs, warns, _ := checkTLSFiles(&good, nil, time.Now()); len(probs)+len(warns) != 0 {
		t.Errorf("good files: problems %s warnings %s", tlsCheckDump(probs), tlsCheckDump(warns))
	}

	bad := Loaded{Name: "p", Prefix: "P", Client: Client{TLSCAFile: "/nonexistent/ca", TLSCertFile: "/nonexistent/c", TLSKeyFile: "/nonexistent/k"}}
	skip := map[string]bool{"TLSCAFile": true, "TLSCertFile": true, "TLSKeyFile": true}
	if probs, _, _ := checkTLSFiles(&bad, skip, time.Now()); len(probs) != 0 {
		t.Errorf("skipped fields checked: %s", tlsCheckDump(probs))
	}
	if probs, _, _ := checkTLSFiles(&bad, nil, time.Now()); len(probs) != 3 {
		t.Errorf("missing files: %s, want 3 problems", tlsCheckDump(probs))
	}

	// A bundle with one good and one corrupt certificate is a problem.
	mixed := testutil.WriteFile(t, dir, "mixed.pem", append(append([]byte{}, ca.PEM...),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x01}})...))
	m := Loaded{Name: "p", Prefix: "P", Client: Client{TLSCAFile: mixed}}
	if probs, _, _ := checkTLSFiles(&m, nil, time.Now()); len(probs) != 1 || !strings.Contains(probs[0].Rule, "1 of 2 certificates do not parse") {
		t.Errorf("mixed bundle: %s", tlsCheckDump(probs))
	}
}
