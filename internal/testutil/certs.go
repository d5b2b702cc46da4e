package testutil

// Certificates for TLS tests: a private CA, leaf certificates it signs,
// self-signed certificates, and the files they are written to. Everything is
// generated at run time (ECDSA P-256) and nothing is checked in; write the
// PEM to t.TempDir() with [WriteFile], and rotate it with [ReplaceFile].
//
//	ca := testutil.NewCA(t, "private CA")
//	certPEM, keyPEM := ca.Issue(t, testutil.Leaf{CN: "payments-client", Serial: 4242})
//	certFile := testutil.WriteFile(t, dir, "client.crt", certPEM)
//	conf := &tls.Config{RootCAs: ca.Pool()}

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a private certificate authority for tests.
type CA struct {
	Cert *x509.Certificate // the CA's self-signed certificate
	Key  *ecdsa.PrivateKey // the key that signs what [CA.Issue] issues
	PEM  []byte            // Cert as a PEM "CERTIFICATE" block, for a CA file
}

// NewCA makes a CA whose certificate has the common name cn, serial 1, and
// is valid from an hour ago for 365 days.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testutil.NewCA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testutil.NewCA: %v", err)
	}
	return &CA{Cert: cert, Key: key, PEM: pemCert(der)}
}

// Pool returns a certificate pool holding the CA alone, for
// tls.Config.RootCAs or tls.Config.ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf describes a certificate for [CA.Issue] or [SelfSigned].
type Leaf struct {
	// CN is the subject common name.
	CN string
	// Serial is the serial number; 0 lets crypto/x509 pick a random one.
	Serial int64
	// Server makes a server certificate (server authentication, for DNS
	// name "localhost" and IP addresses 127.0.0.1 and ::1); otherwise the
	// certificate is for client authentication.
	Server bool
	// NotBefore and NotAfter bound the validity; zero means an hour ago
	// and 24 hours from now. They need not lie within the CA's.
	NotBefore, NotAfter time.Time
	// SEC1 encodes the private key as a SEC 1 "EC PRIVATE KEY" block
	// rather than a PKCS #8 "PRIVATE KEY" block.
	SEC1 bool
}

// template returns the x509 template of l, with defaults filled in.
func (l Leaf) template() *x509.Certificate {
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: l.CN},
		NotBefore:   l.NotBefore,
		NotAfter:    l.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if l.Serial != 0 {
		tmpl.SerialNumber = big.NewInt(l.Serial)
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(24 * time.Hour)
	}
	if l.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	return tmpl
}

// Issue signs the certificate l with the CA under a new key, and returns
// the PEM of the certificate and of its private key (PKCS #8 unless
// l.SEC1), ready for tls.X509KeyPair or a TLS_CERT_FILE / TLS_KEY_FILE.
func (ca *CA) Issue(t testing.TB, l Leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	return sign(t, l, ca)
}

// SelfSigned makes the certificate l signed by its own new key, and
// returns the PEM of the certificate and of the key, as [CA.Issue] does.
func SelfSigned(t testing.TB, l Leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	return sign(t, l, nil)
}

// sign creates the certificate l for a new key, signed by ca, or by
// itself when ca is nil.
func sign(t testing.TB, l Leaf, ca *CA) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := l.template()
	who, parent, parentKey := "testutil.CA.Issue", tmpl, key
	if ca != nil {
		parent, parentKey = ca.Cert, ca.Key
	} else {
		who = "testutil.SelfSigned"
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("%s %q: %v", who, l.CN, err)
	}
	block := &pem.Block{Type: "PRIVATE KEY"}
	if l.SEC1 {
		block.Type = "EC PRIVATE KEY"
		block.Bytes, err = x509.MarshalECPrivateKey(key)
	} else {
		block.Bytes, err = x509.MarshalPKCS8PrivateKey(key)
	}
	if err != nil {
		t.Fatalf("%s %q: %v", who, l.CN, err)
	}
	return pemCert(der), pem.EncodeToMemory(block)
}

// newKey generates an ECDSA P-256 key.
func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testutil: generating an ECDSA P-256 key: %v", err)
	}
	return k
}

// pemCert encodes a DER certificate as a PEM "CERTIFICATE" block.
func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// WriteFile writes data to dir/name with mode 0600 and returns the path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatalf("testutil.WriteFile: %v", err)
	}
	return p
}

// ReplaceFile replaces dir/name with data the way secret rotation does:
// it writes the temporary file dir/.name.tmp, then renames it over the old
// one, so a reader sees the old file or the new one, never a part of
// either, and the path names a new inode.
func ReplaceFile(t testing.TB, dir, name string, data []byte) {
	t.Helper()
	tmp := WriteFile(t, dir, "."+name+".tmp", data)
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatalf("testutil.ReplaceFile: %v", err)
	}
}
