package registry

import (
	"crypto/tls"
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
// parse, match and are in date; New reports any that cannot be read.
func newTLSConfig(l config.Loaded) (*tls.Config, error) {
	files, _ := l.TLSFiles() // read by config.Load; zero: read them here
	c, _, err := buildTLSConfig(l.Client, files, certCheckInterval)
	return c, err
}

// buildTLSConfig is newTLSConfig with the client certificate's check
// interval given, and the certificate's source (nil without one) returned.
func buildTLSConfig(c config.Client, files config.TLSFiles, interval time.Duration) (*tls.Config, *certSource, error) {
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
