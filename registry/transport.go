// Transport: a system's own http.Transport, and the phase a transport
// error comes from. The send stage is its one user.

package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// newTransport builds a system's own transport: its own pool, sized from
// MAX_CONCURRENT, with the connect, TLS handshake and response-header
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

// classify names the phase a transport error comes from. ctx is the
// call's capped context: when it ended, its end names the op (the
// caller's cancellation, CALL_TIMEOUT, the caller's budget, a stream's
// own timer); otherwise the error does.
func classify(ctx context.Context, err error) observe.Op {
	switch ctx.Err() {
	case nil:
	case context.Canceled:
		if op, ok := streamTimeout(ctx); ok {
			return op // a stream's timer, not the caller
		}
		return observe.OpCanceled
	default: // a deadline: ours (CALL_TIMEOUT) or the caller's budget
		if errors.Is(context.Cause(ctx), capbudget.ErrCallTimeout) {
			return observe.OpCallTimeout
		}
		return observe.OpBudgetTimeout
	}
	var op *net.OpError
	if errors.As(err, &op) {
		switch {
		case op.Op == "dial" && op.Timeout():
			return observe.OpConnectTimeout
		case op.Op == "dial":
			return observe.OpConnect
		case op.Op == "remote error" && op.Err != nil && certAlert(op.Err.Error()):
			// The server refused the handshake over our certificate or
			// version: the same certificate gets the same answer.
			return observe.OpTLS
		}
	}
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		return observe.OpTLS // we refused the server's certificate
	}
	// net/http exports no type for these timeouts and request checks;
	// match the text it has used for years.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "TLS handshake timeout"):
		return observe.OpTLSTimeout
	case strings.Contains(msg, "timeout awaiting response headers"):
		return observe.OpReadTimeout
	case strings.HasPrefix(msg, "net/http: invalid header field"),
		strings.HasPrefix(msg, "net/http: invalid method"),
		strings.HasPrefix(msg, "net/http: nil Request"),
		strings.HasPrefix(msg, "unsupported protocol scheme"),
		strings.HasPrefix(msg, "http: no Host in request URL"):
		return observe.OpRequest
	}
	return observe.OpTransport
}

// certAlert reports whether a TLS alert from the server (net/http reports
// it as a *net.OpError "remote error" wrapping an unexported type, so the
// text is all there is) is about certificates, versions or access: alerts
// a retry with the same configuration cannot change. "internal error" and
// the like stay retryable.
func certAlert(msg string) bool {
	for _, a := range []string{"bad certificate", "unsupported certificate", "certificate revoked",
		"certificate expired", "certificate unknown", "unknown certificate authority", "access denied",
		"certificate required", "handshake failure", "protocol version", "insufficient security"} {
		if strings.Contains(msg, a) {
			return true
		}
	}
	return false
}

// transportError is a transport error with the op the registry names it by: the
// error the tracers of a system's attempts see (observe.Tracer). Its
// ErrorType is the op's name ("connect timeout"), which OpenTelemetry's
// error.type attribute takes.
type transportError struct {
	Op  observe.Op
	Err error
}

func (e *transportError) Error() string     { return e.Err.Error() }
func (e *transportError) Unwrap() error     { return e.Err }
func (e *transportError) ErrorType() string { return e.Op.String() }

// withClassify wraps rt so that its errors are [*transportError]: the registry puts
// it under the tracers' wrappers, and only when there is a tracer (it
// costs an allocation per failed attempt).
func withClassify(rt http.RoundTripper) http.RoundTripper { return classifying{rt} }

type classifying struct{ rt http.RoundTripper }

func (c classifying) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return nil, &transportError{Op: classify(req.Context(), err), Err: err}
	}
	return resp, nil
}
