package registry

// TLS per system, against real TLS servers on 127.0.0.1 with a private CA.
// Every certificate and key is generated at run time (internal/testutil)
// and written to t.TempDir(); none is checked in. Helpers carry the prefix
// mtls so that they never collide with those of the other test files of the
// package.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
)

// mtlsServerOpts shape a test server.
type mtlsServerOpts struct {
	clientCAs  *x509.CertPool // non-nil: RequireAndVerifyClientCert
	minVersion uint16
	maxVersion uint16
}

// mtlsServer starts a TLS server on 127.0.0.1 with a certificate of ca. It
// answers 200 with headers naming the client certificate it saw (serial
// and CN, "-" for none) and the TLS version, and counts the requests that
// reached it.
func mtlsServer(t *testing.T, ca *testutil.CA, o mtlsServerOpts) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		serial, cn := "-", "-"
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			serial = r.TLS.PeerCertificates[0].SerialNumber.String()
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("X-Client-Serial", serial)
		w.Header().Set("X-Client-CN", cn)
		w.Header().Set("X-TLS-Version", tls.VersionName(r.TLS.Version))
		_, _ = io.WriteString(w, "ok")
	}))
	certPEM, keyPEM := ca.Issue(t, testutil.Leaf{CN: "server", Serial: 2, Server: true})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: o.minVersion, MaxVersion: o.maxVersion}
	if o.clientCAs != nil {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = o.clientCAs
	}
	// Rejected handshakes are the point of these tests; keep them out of
	// the log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &hits
}

// mtlsGet sends GET / through the named system and returns the response
// headers (the body is read and closed) or the error.
func mtlsGet(t *testing.T, r *Registry, system string) (http.Header, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.MustClient(system).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("%s: reading the body: %v", system, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, want 200", system, resp.StatusCode)
	}
	return resp.Header, nil
}

// mtlsWantErr checks that err is a call error of system, wrapped in the
// package's *Error.
func mtlsWantErr(t *testing.T, err error, system string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: the call succeeded, want an error", system)
	}
	var e *Error
	if !errors.As(err, &e) || e.System != system {
		t.Fatalf("%s: error %T %v is not an *Error of the system", system, err, err)
	}
	return e
}

// TestTLSClientCertificate: a server that requires a client certificate
// of its private CA accepts the configured one and rejects a call
// without one; the handler never runs for the latter.
func TestTLSClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA := testutil.NewCA(t, "server CA")
	clientCA := testutil.NewCA(t, "client CA")
	srv, hits := mtlsServer(t, serverCA, mtlsServerOpts{clientCAs: clientCA.Pool()})

	caFile := testutil.WriteFile(t, dir, "server-ca.pem", serverCA.PEM)
	certPEM, keyPEM := clientCA.Issue(t, testutil.Leaf{CN: "payments-client", Serial: 4242})
	certFile := testutil.WriteFile(t, dir, "client.crt", certPEM)
	keyFile := testutil.WriteFile(t, dir, "client.key", keyPEM)
	// A certificate of a CA the server does not trust.
	otherPEM, otherKey := testutil.NewCA(t, "rogue CA").Issue(t, testutil.Leaf{CN: "rogue", Serial: 7})

	r := loadRegistry(t, systemsEnv(map[string]map[string]string{
		"withcert": {"BASE_URL": srv.URL, "TLS_CA_FILE": caFile, "TLS_CERT_FILE": certFile, "TLS_KEY_FILE": keyFile},
		"nocert":   {"BASE_URL": srv.URL, "TLS_CA_FILE": caFile},
		"rogue": {"BASE_URL": srv.URL, "TLS_CA_FILE": caFile,
			"TLS_CERT_FILE": testutil.WriteFile(t, dir, "rogue.crt", otherPEM), "TLS_KEY_FILE": testutil.WriteFile(t, dir, "rogue.key", otherKey)},
	}))

	h, err := mtlsGet(t, r, "withcert")
	if err != nil {
		t.Fatalf("withcert: %v", err)
	}
	if h.Get("X-Client-Serial") != "4242" || h.Get("X-Client-CN") != "payments-client" {
		t.Errorf("server saw client certificate serial %s CN %s, want 4242 payments-client", h.Get("X-Client-Serial"), h.Get("X-Client-CN"))
	}
	before := hits.Load()

	for _, system := range []string{"nocert", "rogue"} {
		_, err = mtlsGet(t, r, system)
		e := mtlsWantErr(t, err, system)
		t.Logf("%s: %v", system, err)
		// A certificate refusal is not retried: one attempt, op tls.
		if e.Op != observe.OpTLS || e.Attempts > 1 {
			t.Errorf("%s: op %q after %d attempts, want %q after 1", system, e.Op, e.Attempts, observe.OpTLS)
		}
		if !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: error does not mention the certificate: %v", system, err)
		}
	}
	if n := hits.Load() - before; n != 0 {
		t.Errorf("the handler ran %d times for calls without an accepted certificate", n)
	}
}

// TestTLSPrivateCA: a server with a certificate of a private CA is
// reachable with TLS_CA_FILE (added to the system roots, or alone with
// TLS_CA_ONLY) and not without it, where the error is x509's unknown
// authority.
func TestTLSPrivateCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testutil.NewCA(t, "private CA")
	srv, _ := mtlsServer(t, ca, mtlsServerOpts{})
	caFile := testutil.WriteFile(t, dir, "ca.pem", ca.PEM)
	otherCA := testutil.WriteFile(t, dir, "other-ca.pem", testutil.NewCA(t, "other CA").PEM)

	r := loadRegistry(t, systemsEnv(map[string]map[string]string{
		"withca":    {"BASE_URL": srv.URL, "TLS_CA_FILE": caFile},
		"caonly":    {"BASE_URL": srv.URL, "TLS_CA_FILE": caFile, "TLS_CA_ONLY": "true"},
		"noca":      {"BASE_URL": srv.URL},
		"wrongonly": {"BASE_URL": srv.URL, "TLS_CA_FILE": otherCA, "TLS_CA_ONLY": "true"},
		// The server's certificate names 127.0.0.1 and localhost, not
		// this: the override is what gets verified.
		"wrongname": {"BASE_URL": srv.URL, "TLS_CA_FILE": caFile, "TLS_SERVER_NAME": "payments.internal"},
		"goodname":  {"BASE_URL": srv.URL, "TLS_CA_FILE": caFile, "TLS_SERVER_NAME": "localhost"},
	}))
	for _, system := range []string{"withca", "caonly", "goodname"} {
		if _, err := mtlsGet(t, r, system); err != nil {
			t.Errorf("%s: %v", system, err)
		}
	}
	for _, system := range []string{"noca", "wrongonly"} {
		_, err := mtlsGet(t, r, system)
		mtlsWantErr(t, err, system)
		var ua x509.UnknownAuthorityError
		if !errors.As(err, &ua) {
			t.Errorf("%s: error does not wrap x509.UnknownAuthorityError: %v", system, err)
		}
		t.Logf("%s: %v", system, err)
	}
	_, err := mtlsGet(t, r, "wrongname")
	mtlsWantErr(t, err, "wrongname")
	var hn x509.HostnameError
	if !errors.As(err, &hn) || hn.Host != "payments.internal" {
		t.Errorf("wrongname: error does not wrap an x509.HostnameError for payments.internal: %v", err)
	}
}

// TestTLSMinVersion: TLS_MIN_VERSION 1.2 and 1.3 both reach a TLS
// 1.3-only server; 1.3 cannot reach a server that stops at 1.2.
func TestTLSMinVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testutil.NewCA(t, "private CA")
	caFile := testutil.WriteFile(t, dir, "ca.pem", ca.PEM)
	only13, _ := mtlsServer(t, ca, mtlsServerOpts{minVersion: tls.VersionTLS13})
	max12, max12Hits := mtlsServer(t, ca, mtlsServerOpts{maxVersion: tls.VersionTLS12})

	r := loadRegistry(t, systemsEnv(map[string]map[string]string{
		"min12to13": {"BASE_URL": only13.URL, "TLS_CA_FILE": caFile, "TLS_MIN_VERSION": "1.2"},
		"min13to13": {"BASE_URL": only13.URL, "TLS_CA_FILE": caFile, "TLS_MIN_VERSION": "1.3"},
		"min12to12": {"BASE_URL": max12.URL, "TLS_CA_FILE": caFile, "TLS_MIN_VERSION": "1.2"},
		"min13to12": {"BASE_URL": max12.URL, "TLS_CA_FILE": caFile, "TLS_MIN_VERSION": "1.3"},
	}))
	for system, want := range map[string]string{"min12to13": "TLS 1.3", "min13to13": "TLS 1.3", "min12to12": "TLS 1.2"} {
		h, err := mtlsGet(t, r, system)
		if err != nil {
			t.Errorf("%s: %v", system, err)
			continue
		}
		if got := h.Get("X-TLS-Version"); got != want {
			t.Errorf("%s: negotiated %s, want %s", system, got, want)
		}
	}
	before := max12Hits.Load()
	_, err := mtlsGet(t, r, "min13to12")
	mtlsWantErr(t, err, "min13to12")
	t.Logf("min13to12: %v", err)
	if !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("min13to12: error does not name the protocol version: %v", err)
	}
	if max12Hits.Load() != before {
		t.Error("min13to12: the request reached the TLS 1.2 server")
	}
}

// TestTLSClientCertRotation replaces the certificate and key files under
// a live client. New connections present the new certificate once the
// check interval has passed; a half-done rotation (new certificate, old
// key) keeps the last good pair in use.
func TestTLSClientCertRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testutil.NewCA(t, "private CA")
	srv, _ := mtlsServer(t, ca, mtlsServerOpts{clientCAs: ca.Pool()})
	caFile := testutil.WriteFile(t, dir, "ca.pem", ca.PEM)
	cert1, key1 := ca.Issue(t, testutil.Leaf{CN: "gen-1", Serial: 1001})
	cert2, key2 := ca.Issue(t, testutil.Leaf{CN: "gen-2", Serial: 1002})
	cert3, key3 := ca.Issue(t, testutil.Leaf{CN: "gen-3", Serial: 1003})
	certFile := testutil.WriteFile(t, dir, "tls.crt", cert1)
	keyFile := testutil.WriteFile(t, dir, "tls.key", key1)

	// The registry checks the files every certCheckInterval (seconds);
	// build the same client with a short interval.
	ls, err := config.LoadEnv(map[string]string{"ROT_BASE_URL": srv.URL, "ROT_TLS_CA_FILE": caFile,
		"ROT_TLS_CERT_FILE": certFile, "ROT_TLS_KEY_FILE": keyFile, "ROT_RETRIES": "0"}, config.System{Name: "rot"})
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Bool
	const interval = 20 * time.Millisecond
	c, err := newClient(ls[0], &options{certInterval: interval}, &closed)
	if err != nil {
		t.Fatal(err)
	}
	src := c.certs
	t.Cleanup(c.closeIdle)

	get := func(step string) string {
		t.Helper()
		// Force a new connection, so a new handshake, as a new pod or an
		// expired idle connection would.
		c.HTTPClient().CloseIdleConnections()
		time.Sleep(2 * interval)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get("X-Client-Serial") + " " + resp.Header.Get("X-Client-CN")
	}
	if got := get("first"); got != "1001 gen-1" {
		t.Fatalf("first call: server saw %q, want 1001 gen-1", got)
	}

	// Half a rotation: the new certificate next to the old key does not
	// load; the old pair stays in use.
	testutil.ReplaceFile(t, dir, "tls.crt", cert2)
	if got := get("half rotation"); got != "1001 gen-1" {
		t.Errorf("after replacing the certificate alone: server saw %q, want the last good pair 1001 gen-1", got)
	}
	if _, lastErr := src.status(); lastErr == nil {
		t.Error("a mismatched pair was not reported as a failed reload")
	} else {
		t.Logf("half rotation: kept the last good pair: %v", lastErr)
	}

	// The key follows: the new pair is used from the next handshake on,
	// while the pooled connection keeps the certificate it was made with.
	testutil.ReplaceFile(t, dir, "tls.key", key2)
	time.Sleep(2 * interval)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "/", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("X-Client-Serial"); got != "1001" {
		t.Errorf("pooled connection after rotation: server saw serial %s, want 1001 (no new handshake)", got)
	}
	if got := get("rotated"); got != "1002 gen-2" {
		t.Errorf("after rotation: server saw %q, want 1002 gen-2", got)
	}

	// Rewriting the files in place works too (same inode; the
	// modification time moves).
	testutil.WriteFile(t, dir, "tls.key", key3)
	testutil.WriteFile(t, dir, "tls.crt", cert3)
	future := time.Now().Add(time.Second)
	_ = os.Chtimes(certFile, future, future)
	if got := get("in place"); got != "1003 gen-3" {
		t.Errorf("after rewriting in place: server saw %q, want 1003 gen-3", got)
	}
	if reloads, lastErr := src.status(); reloads != 2 || lastErr != nil {
		t.Errorf("status: %d reloads, last error %v; want 2, nil", reloads, lastErr)
	}
}

// TestNewRefusesUnvalidatedSettings: a config.Loaded built by hand (zero
// timeouts would mean no timeouts) never becomes a client.
func TestNewRefusesUnvalidatedSettings(t *testing.T) {
	t.Parallel()
	_, err := New([]config.Loaded{{Name: "payments", Prefix: "PAYMENTS", Client: config.Client{BaseURL: "https://p"}}})
	if err == nil || !strings.Contains(err.Error(), "config.Load") {
		t.Errorf("New with hand-built settings: err = %v, want a refusal pointing at config.Load", err)
	}
}
