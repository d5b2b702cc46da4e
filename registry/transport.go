package registry

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/config"
)

// newTransport builds a system's own transport: its own pool, sized from
// MaxConcurrent, with the connect, TLS handshake and response-header
// timeouts of its settings. It starts from a clone of net/http's default
// transport (proxy from the environment, HTTP/2 attempted) and shares
// nothing with it.
func newTransport(c config.Client, tlsConf *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: c.ConnectTimeout, KeepAlive: 30 * time.Second}
	t.DialContext = d.DialContext
	t.TLSHandshakeTimeout = c.TLSHandshakeTimeout
	t.ResponseHeaderTimeout = c.ReadTimeout
	t.IdleConnTimeout = c.IdleConnTimeout
	// The default MaxIdleConnsPerHost is 2: at 20 in flight, 18 of every 20
	// connections would be closed after use and dialled again. The pool
	// keeps as many idle connections as calls may be in flight, and never
	// opens more than that.
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = c.MaxConcurrent
	t.MaxConnsPerHost = c.MaxConcurrent
	t.ForceAttemptHTTP2 = true
	t.Proxy = http.ProxyFromEnvironment
	t.TLSClientConfig = tlsConf
	return t
}
