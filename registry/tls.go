package registry

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/outbound-go/outbound/config"
)

// newTLSConfig builds the TLS settings of one system from its variables:
//
//   - TLS_MIN_VERSION: the lowest version offered, 1.2 (baseline) or 1.3.
//   - TLS_CA_FILE: a PEM bundle of CAs trusted in addition to the system
//     roots; with TLS_CA_ONLY=true, trusted instead of them. Unset, the
//     system roots alone are trusted.
//   - TLS_SERVER_NAME: the name sent in SNI and verified against the
//     server's certificate, instead of BASE_URL's host.
//   - TLS_CERT_FILE and TLS_KEY_FILE: the client certificate for mTLS. It
//     is given through tls.Config.GetClientCertificate, so a server that
//     asks for none gets none, and it follows rotation: the files are
//     looked at again, at most every few seconds (certCheckInterval), on
//     the handshakes that ask for a certificate, and read again when one of
//     them was replaced or its modification time or size changed. A pair
//     that does not load (written half-way, a key that does not match its
//     certificate yet) is ignored: the last good pair stays in use until
//     the files change into a good one. Connections already open keep the
//     certificate they were made with; new connections get the new one.
//
// Server certificates are always verified; there is no setting to skip
// verification. config.Load has already checked that the files exist,
// parse, match and are in date; newTLSConfig reports any that cannot be read.
//
// interval is how often, at most, the client certificate's files are
// looked at for a change (certCheckInterval in production). The
// certificate's source is returned too (nil without one), for its
// certSource.status.
func newTLSConfig(l config.Loaded, interval time.Duration) (*tls.Config, *certSource, error) {
	c := l.Client
	files, _ := l.TLSFiles() // read by config.Load; zero: read them here
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if c.TLSMinVersion == "1.3" {
		conf.MinVersion = tls.VersionTLS13
	}
	if c.TLSCAFile != "" {
		pool, err := caPool(c.TLSCAFile, files.CAPEM, c.TLSCAOnly)
		if err != nil {
			return nil, nil, err
		}
		conf.RootCAs = pool
	}
	var src *certSource
	if c.TLSCertFile != "" || c.TLSKeyFile != "" {
		var err error
		if src, err = newCertSourceFrom(c.TLSCertFile, c.TLSKeyFile, interval, files); err != nil {
			return nil, nil, err
		}
		conf.GetClientCertificate = src.GetClientCertificate
	}
	return conf, src, nil
}

// certCheckInterval is how often, at most, a client certificate's files are
// looked at for a change.
const certCheckInterval = 5 * time.Second

// caPool returns the roots to verify servers with: the system pool plus
// the certificates of caFile, or those alone when caOnly is set. pem is
// the file's content as config.Load read it; nil reads the file.
func caPool(caFile string, pem []byte, caOnly bool) (*x509.CertPool, error) {
	if pem == nil {
		var err error
		if pem, err = os.ReadFile(caFile); err != nil {
			return nil, fmt.Errorf("TLS_CA_FILE: %w", err)
		}
	}
	var pool *x509.CertPool
	if caOnly {
		pool = x509.NewCertPool()
	} else {
		var err error
		if pool, err = x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("TLS_CA_FILE: loading the system roots to add %s to: %w", caFile, err)
		}
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("TLS_CA_FILE: %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// fileStamp identifies one version of a file: a change of file (a
// rename over it, as Kubernetes does with secret volumes), modification
// time or size is a new version.
type fileStamp struct {
	info os.FileInfo
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path) // follows symlinks: the stamp is the target's
	return fileStamp{fi}, err
}

func (a fileStamp) same(b fileStamp) bool {
	if a.info == nil || b.info == nil {
		return false
	}
	return os.SameFile(a.info, b.info) && a.info.ModTime().Equal(b.info.ModTime()) && a.info.Size() == b.info.Size()
}

// certSource serves a client certificate read from a certificate and a
// key file, and reads them again when either changes. Changes are looked
// for at most every interval, on the TLS handshakes that ask for a client
// certificate; a pair that fails to load (a half-written rotation, a key
// that does not match yet) is ignored and the last good pair stays in use
// until the files change again into a good pair.
type certSource struct {
	certFile, keyFile string
	// interval is the least time between two looks at the files.
	interval time.Duration

	mu                  sync.Mutex
	cert                *tls.Certificate
	certStamp, keyStamp fileStamp
	checked             time.Time // last look at the files
	lastErr             error     // of the last failed reload, nil after a good one
	reloads             int       // good reloads after the first load
}

// newCertSource loads the pair once; it must load.
func newCertSource(certFile, keyFile string, interval time.Duration) (*certSource, error) {
	return newCertSourceFrom(certFile, keyFile, interval, config.TLSFiles{})
}

// newCertSourceFrom starts from the pair config.Load read (files.Cert,
// with the files' stamps as read) and reads the files only when it has
// none.
func newCertSourceFrom(certFile, keyFile string, interval time.Duration, files config.TLSFiles) (*certSource, error) {
	s := &certSource{certFile: certFile, keyFile: keyFile, interval: interval}
	if files.Cert != nil && files.CertInfo != nil && files.KeyInfo != nil {
		s.cert, s.certStamp, s.keyStamp = files.Cert, fileStamp{files.CertInfo}, fileStamp{files.KeyInfo}
		s.checked = time.Now()
		return s, nil
	}
	cs, ks, cert, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cert, s.certStamp, s.keyStamp, s.checked = cert, cs, ks, time.Now()
	return s, nil
}

// load reads both files, stamping them before reading so that a change
// made during the read is seen on the next look.
func (s *certSource) load() (cs, ks fileStamp, cert *tls.Certificate, err error) {
	if cs, err = stampOf(s.certFile); err != nil {
		return cs, ks, nil, fmt.Errorf("TLS_CERT_FILE: %w", err)
	}
	if ks, err = stampOf(s.keyFile); err != nil {
		return cs, ks, nil, fmt.Errorf("TLS_KEY_FILE: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return cs, ks, nil, fmt.Errorf("TLS_CERT_FILE/TLS_KEY_FILE: %w", err)
	}
	return cs, ks, &pair, nil
}

// GetClientCertificate is the tls.Config hook. It never fails once the
// first pair has loaded.
func (s *certSource) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return s.current(time.Now()), nil
}

// current returns the pair in use, reloading it first if the last look
// is more than interval old and a file has changed since.
func (s *certSource) current(now time.Time) *tls.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.checked) < s.interval {
		return s.cert
	}
	s.checked = now
	cs, cerr := stampOf(s.certFile)
	ks, kerr := stampOf(s.keyFile)
	if cerr == nil && kerr == nil && cs.same(s.certStamp) && ks.same(s.keyStamp) {
		return s.cert
	}
	cs, ks, cert, err := s.load()
	if err != nil {
		// Keep the last good pair; the stamps stay old, so the next look
		// tries again.
		s.lastErr = err
		return s.cert
	}
	s.cert, s.certStamp, s.keyStamp, s.lastErr = cert, cs, ks, nil
	s.reloads++
	return s.cert
}

// status returns the number of good reloads and the error of the last
// failed one (nil once a reload succeeds).
func (s *certSource) status() (reloads int, lastErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloads, s.lastErr
}
