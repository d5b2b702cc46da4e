package registry

import (
	"os"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
)

// TestTLSFilesReadOnce: config.Load reads and checks the TLS files, and
// the registry builds the system's TLS settings from what Load read,
// without reading the files again (issue #12: they were read twice).
// Removing the files after Load proves it.
func TestTLSFilesReadOnce(t *testing.T) {
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
	conf, err := newTLSConfig(ls[0])
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
