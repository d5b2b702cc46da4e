package registry

import (
	"crypto/tls"

	"github.com/outbound-go/outbound/config"
)

// newTLSConfig builds a system's TLS settings: the minimum version, and
// (see tlsfiles.go) extra CAs and a client certificate.
func newTLSConfig(l config.Loaded) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: l.Client.TLSServerName}
	if l.Client.TLSMinVersion == "1.3" {
		c.MinVersion = tls.VersionTLS13
	}
	return c, nil
}
