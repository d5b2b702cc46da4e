package testutil_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
)

// handshake runs one TLS handshake between a server on 127.0.0.1 that
// presents serverPair and requires a client certificate of clientCAs, and a
// client that trusts roots and presents clientPair. It returns the client's
// error and, if the server side completed, the CN of the certificate the
// server saw.
func handshake(t *testing.T, serverPair tls.Certificate, clientCAs *x509.CertPool, roots *x509.CertPool, clientPair tls.Certificate) (sawCN string, err error) {
	t.Helper()
	ln, err := tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{serverPair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
	})
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	var serverCN string
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			serverCN = certs[0].Subject.CommonName
		}
		_, _ = tc.Write([]byte{1}) // lets the client know the server accepted
	})

	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp4", ln.Addr().String(), &tls.Config{
		RootCAs: roots,
		// Present clientPair even when its issuer is not among the CAs
		// the server asks for, so the server has to verify it.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &clientPair, nil },
	})
	if err == nil {
		// With TLS 1.3 the server verifies the client certificate after
		// the client's handshake returns: read for its verdict.
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	ln.Close() // ends an Accept still waiting
	wg.Wait()
	return serverCN, err
}

// keyPair returns a function that loads a PEM pair with tls.X509KeyPair,
// so that it takes the two results of Issue or SelfSigned directly.
func keyPair(t *testing.T) func(certPEM, keyPEM []byte) tls.Certificate {
	t.Helper()
	return func(certPEM, keyPEM []byte) tls.Certificate {
		t.Helper()
		p, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// TestCAMutualTLS: a server certificate and a client certificate of one CA
// complete a mutual-TLS handshake over 127.0.0.1, each side trusting the
// CA's pool alone; a client certificate of another CA is refused.
func TestCAMutualTLS(t *testing.T) {
	ca := testutil.NewCA(t, "test CA")
	server := keyPair(t)(ca.Issue(t, testutil.Leaf{CN: "server", Serial: 2, Server: true}))
	client := keyPair(t)(ca.Issue(t, testutil.Leaf{CN: "client", Serial: 3}))

	cn, err := handshake(t, server, ca.Pool(), ca.Pool(), client)
	if err != nil {
		t.Fatalf("mutual TLS handshake: %v", err)
	}
	if cn != "client" {
		t.Errorf("server saw client certificate CN %q, want client", cn)
	}

	rogue := keyPair(t)(testutil.NewCA(t, "rogue CA").Issue(t, testutil.Leaf{CN: "rogue"}))
	cn, err = handshake(t, server, ca.Pool(), ca.Pool(), rogue)
	if err == nil || cn != "" {
		t.Fatalf("client certificate of another CA: err %v, server saw %q; want a refused handshake", err, cn)
	}
	t.Logf("client certificate of another CA: %v", err)
}

// TestLeafDefaults: a Leaf with only a CN is a client certificate valid
// from an hour ago to a day from now; Server adds server authentication
// for localhost, 127.0.0.1 and ::1.
func TestLeafDefaults(t *testing.T) {
	ca := testutil.NewCA(t, "test CA")
	before := time.Now()
	certPEM, keyPEM := ca.Issue(t, testutil.Leaf{CN: "c"})
	leaf := parseCert(t, certPEM)
	if leaf.NotBefore.After(before.Add(-59*time.Minute)) || leaf.NotAfter.Before(before.Add(23*time.Hour)) {
		t.Errorf("validity %v to %v, want about an hour ago to a day from now", leaf.NotBefore, leaf.NotAfter)
	}
	if len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("ExtKeyUsage %v, want client auth", leaf.ExtKeyUsage)
	}
	if leaf.SerialNumber.Sign() <= 0 {
		t.Errorf("serial %v, want a positive one picked for 0", leaf.SerialNumber)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Errorf("key PEM %q, want a PKCS #8 PRIVATE KEY block", keyPEM)
	}

	srvPEM, _ := ca.Issue(t, testutil.Leaf{CN: "s", Server: true})
	srv := parseCert(t, srvPEM)
	if err := srv.VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
	for _, ip := range []string{"127.0.0.1", "::1"} {
		if err := srv.VerifyHostname(ip); err != nil {
			t.Error(err)
		}
	}
	if _, err := srv.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost"}); err != nil {
		t.Errorf("server certificate does not verify against the CA: %v", err)
	}
}

// TestSelfSigned: a self-signed certificate parses with the requested
// NotAfter, CN and serial, is signed by its own key, and SEC1 gives an
// "EC PRIVATE KEY" that tls.X509KeyPair accepts.
func TestSelfSigned(t *testing.T) {
	notAfter := time.Now().Add(5 * 24 * time.Hour).Truncate(time.Second) // x509 times have seconds
	certPEM, keyPEM := testutil.SelfSigned(t, testutil.Leaf{CN: "payments-client", Serial: 7, NotAfter: notAfter, SEC1: true})
	c := parseCert(t, certPEM)
	if !c.NotAfter.Equal(notAfter) {
		t.Errorf("NotAfter %v, want %v", c.NotAfter, notAfter)
	}
	if c.Subject.CommonName != "payments-client" || c.SerialNumber.Int64() != 7 {
		t.Errorf("CN %q serial %v, want payments-client 7", c.Subject.CommonName, c.SerialNumber)
	}
	if err := c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
		t.Errorf("not signed by its own key: %v", err)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "EC PRIVATE KEY" {
		t.Errorf("key PEM %q, want an EC PRIVATE KEY block", keyPEM)
	}
	keyPair(t)(certPEM, keyPEM)
}

// TestWriteAndReplaceFile: WriteFile writes mode 0600; ReplaceFile puts
// new content at the path under a new inode and leaves no temporary file.
func TestWriteAndReplaceFile(t *testing.T) {
	dir := t.TempDir()
	p := testutil.WriteFile(t, dir, "tls.crt", []byte("one"))
	if p != filepath.Join(dir, "tls.crt") {
		t.Errorf("path %q", p)
	}
	st1, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st1.Mode().Perm())
	}
	testutil.ReplaceFile(t, dir, "tls.crt", []byte("two"))
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, []byte("two")) {
		t.Errorf("after ReplaceFile: %q, %v; want two", b, err)
	}
	st2, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(st1, st2) {
		t.Error("ReplaceFile rewrote the file in place; want a rename over it")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d entries in the directory, want 1 (no temporary file left)", len(entries))
	}
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", certPEM)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
