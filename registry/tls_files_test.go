package registry

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
)

// TestCertSourceLooksAtFilesOncePerIntervalAndKeepsTheLastGoodPair: the files are looked at no more than every
// interval, and an unreadable or broken pair keeps the last good one.
func TestCertSourceLooksAtFilesOncePerIntervalAndKeepsTheLastGoodPair(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "private CA")
	cert1, key1 := ca.Issue(t, testutil.Leaf{CN: "gen-1", Serial: 1})
	cert2, key2 := ca.Issue(t, testutil.Leaf{CN: "gen-2", Serial: 2})
	certFile := testutil.WriteFile(t, dir, "c.pem", cert1)
	keyFile := testutil.WriteFile(t, dir, "k.pem", key1)
	s, err := newCertSource(certFile, keyFile, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serial := func(c *tls.Certificate) int64 {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.Int64()
	}
	t0 := s.checked

	testutil.ReplaceFile(t, dir, "c.pem", cert2)
	testutil.ReplaceFile(t, dir, "k.pem", key2)
	if got := serial(s.current(t0.Add(59 * time.Minute))); got != 1 {
		t.Errorf("within the interval: serial %d, want 1 (no look at the files)", got)
	}
	if got := serial(s.current(t0.Add(61 * time.Minute))); got != 2 {
		t.Errorf("after the interval: serial %d, want 2", got)
	}

	// Garbage, then a missing key: the last good pair stays.
	testutil.ReplaceFile(t, dir, "c.pem", []byte("garbage"))
	if got := serial(s.current(t0.Add(3 * time.Hour))); got != 2 {
		t.Errorf("garbage certificate: serial %d, want 2", got)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if got := serial(s.current(t0.Add(5 * time.Hour))); got != 2 {
		t.Errorf("missing key: serial %d, want 2", got)
	}
	if _, lastErr := s.status(); lastErr == nil || !strings.Contains(lastErr.Error(), "TLS_") {
		t.Errorf("last error %v, want one naming the variable", lastErr)
	}

	// Files back: the next look after the interval loads them.
	testutil.ReplaceFile(t, dir, "c.pem", cert1)
	testutil.ReplaceFile(t, dir, "k.pem", key1)
	if got := serial(s.current(t0.Add(7 * time.Hour))); got != 1 {
		t.Errorf("files back: serial %d, want 1", got)
	}
}

// TestTLSConfigReportsUnreadableFilesByVariable checks that building the TLS settings names the
// variable of a file it cannot use (the files may change between
// config.Load, which checked them, and New).
func TestTLSConfigReportsUnreadableFilesByVariable(t *testing.T) {
	dir := t.TempDir()
	c := config.Baseline()
	c.BaseURL = "https://payments.internal"
	c.TLSCAFile = filepath.Join(dir, "missing-ca.pem")
	_, _, err := newTLSConfig(config.Loaded{Name: "payments", Prefix: "PAYMENTS", Client: c}, certCheckInterval)
	if err == nil || !strings.Contains(err.Error(), "TLS_CA_FILE") {
		t.Errorf("missing CA file: err = %v, want one naming TLS_CA_FILE", err)
	}
	c.TLSCAFile = ""
	c.TLSCertFile = testutil.WriteFile(t, dir, "c.pem", []byte("not a certificate"))
	c.TLSKeyFile = testutil.WriteFile(t, dir, "k.pem", []byte("not a key"))
	_, _, err = newTLSConfig(config.Loaded{Name: "payments", Prefix: "PAYMENTS", Client: c}, certCheckInterval)
	if err == nil || !strings.Contains(err.Error(), "TLS_CERT_FILE") {
		t.Errorf("bad pair: err = %v, want one naming TLS_CERT_FILE", err)
	}
}

// TestFilesLoadReadAreNotReadAgain checks that config.Load reads and checks the TLS files, and
// the registry builds the system's TLS settings from what Load read,
// without reading the files again.
// Removing the files after Load proves it.
func TestFilesLoadReadAreNotReadAgain(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "once-ca")
	certPEM, keyPEM := ca.Issue(t, testutil.Leaf{CN: "once-client", NotAfter: time.Now().Add(30 * 24 * time.Hour)})
	caPEM := ca.PEM
	env := map[string]string{
		"ONCE_BASE_URL":      "https://once.internal",
		"ONCE_TLS_CA_FILE":   testutil.WriteFile(t, dir, "ca.pem", caPEM),
		"ONCE_TLS_CERT_FILE": testutil.WriteFile(t, dir, "c.crt", certPEM),
		"ONCE_TLS_KEY_FILE":  testutil.WriteFile(t, dir, "c.key", keyPEM),
	}
	ls, err := config.LoadEnv(env, config.System{Name: "once"})
	if err != nil {
		t.Fatal(err)
	}
	files, ok := ls[0].TLSFiles()
	if !ok || files.Cert == nil || len(files.CAPEM) == 0 {
		t.Fatalf("TLSFiles() = %v, %v", files, ok)
	}
	for _, k := range []string{"ONCE_TLS_CA_FILE", "ONCE_TLS_CERT_FILE", "ONCE_TLS_KEY_FILE"} {
		if err := os.Remove(env[k]); err != nil {
			t.Fatal(err)
		}
	}
	conf, _, err := newTLSConfig(ls[0], certCheckInterval)
	if err != nil {
		t.Fatalf("the registry read the TLS files again: %v", err)
	}
	if conf.RootCAs == nil || conf.GetClientCertificate == nil {
		t.Fatalf("TLS config without the CA or the client certificate: %+v", conf)
	}
	got, err := conf.GetClientCertificate(nil)
	if err != nil || got != files.Cert {
		t.Errorf("client certificate = %p, %v; want the pair Load read (%p)", got, err, files.Cert)
	}

	// A Loaded whose TLS settings were edited after Load has no files to
	// give: the registry reads them (and here fails, they are gone).
	edited := ls[0]
	edited.Client.TLSCAFile = env["ONCE_TLS_CA_FILE"] + ".other"
	if _, ok := edited.TLSFiles(); ok {
		t.Error("TLSFiles() of edited settings reports ok")
	}
}

// TestNeverSkipsVerification checks that no source file of the core
// module (the modules of their own are not the core's) turns certificate
// verification off.
func TestNeverSkipsVerification(t *testing.T) {
	root := ".." // the core module's root: this package is one below it
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the core module's go.mod: %v", err)
	}
	files := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if _, mod := os.Stat(filepath.Join(p, "go.mod")); p != root && mod == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		files++
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "InsecureSkip"+"Verify") {
			t.Errorf("%s turns verification off", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("%d source files read under %s, want the core module's (at least 20)", files, root)
	}
}
