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
	"github.com/outbound-go/outbound/observe"
)

// send is the transport stage of one attempt: the system's own transport
// (maybe wrapped for tracing), its error classified by phase (op). avail
// is the time the attempt had before its deadline (-1: none), which the
// breaker stage needs to judge a cut attempt fairly.
//
// In a drill (fault.go) the faults are injected here, before the
// transport, so every outer stage sees them as it would see a real
// failing or slow upstream.
func (c *Client) send(req *http.Request) (resp *http.Response, op observe.Op, avail time.Duration, err error) {
	avail = -1
	if dl, ok := req.Context().Deadline(); ok {
		avail = time.Until(dl)
	}
	if c.faults != nil {
		return c.sendFaulty(req, avail)
	}
	resp, err = c.rt.RoundTrip(req)
	if err != nil {
		return nil, classify(req.Context(), err), avail, err
	}
	return resp, 0, avail, nil
}

// sendFaulty is send with the system's faults injected first.
func (c *Client) sendFaulty(req *http.Request, avail time.Duration) (resp *http.Response, op observe.Op, _ time.Duration, err error) {
	out, resp, op, err, done := c.faults.inject(req)
	if done {
		// As a RoundTripper would: the attempt's body is closed, sent
		// or not.
		closeBody(req)
		return resp, op, avail, err
	}
	resp, err = c.rt.RoundTrip(out)
	if err != nil {
		op = classify(req.Context(), err)
		if out != req {
			err = markDelayed(err)
		}
		return nil, op, avail, err
	}
	return resp, 0, avail, nil
}

// classify names the phase a transport error comes from. ctx is the
// call's capped context.
func classify(ctx context.Context, err error) observe.Op {
	switch ctx.Err() {
	case nil:
	case context.Canceled:
		if op, ok := streamTimeout(ctx); ok {
			return op // a stream's timer (stream.go), not the caller
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
