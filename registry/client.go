package registry

import (
	"crypto/tls"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/redact"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// Client is the resilient HTTP client of one external system. Use [Do],
// or [HTTPClient] for libraries that take an *http.Client; both run the
// same pipeline. A Client is safe for concurrent use.
type Client struct {
	name      string
	cfg       config.Client       // the settings, held once
	vars      func() []config.Var // the redacted settings, computed on the first Status
	base      *url.URL
	transport *http.Transport
	rt        http.RoundTripper // transport, maybe wrapped for tracing
	bh        *bulkhead.Bulkhead
	cb        Circuit                        // the breaker stage's state: the system's gobreaker, or its fleet's
	toCircuit func(from, to gobreaker.State) // where the gobreaker's changes go when cb reports states; nil: the observers
	budget    *retryBudget
	hedger    *hedger // nil: the system does not hedge
	observers []observe.Observer
	closed    *atomic.Bool // the registry's
	faults    *faults      // drills only (OUTBOUND_FAULTS=on); nil: none

	checkRedirect func(*http.Request, []*http.Request) error // the redirect policy of follow, the engine of both entry points
	outer         *http.Client                               // HTTPClient()'s template: the whole pipeline per request, never follows itself
	entry         http.RoundTripper                          // one call through the whole pipeline: the call stage, maybe traced

	stats counters

	// limitShown is the adaptive limit last told to the observers,
	// guarded by bh's lock (see limitChanged).
	limitShown int64
}

type counters struct {
	calls, ok, retries, gaveUp, breakerRejected, budgetRejected, retryBudgetDenied, capped atomic.Uint64
	hedges, hedgesWon                                                                      atomic.Uint64
}

func newClient(l config.Loaded, o *options, closed *atomic.Bool, tlsConf *tls.Config) (*Client, error) {
	base, err := url.Parse(l.Client.BaseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{
		name:      l.Name,
		cfg:       l.Client,
		vars:      sync.OnceValue(l.Vars),
		base:      base,
		budget:    newRetryBudget(l.Client.RetryBudgetRatio, l.Client.RetryBudgetMinPerSec),
		hedger:    newHedger(l.Client),
		observers: o.observers,
		closed:    closed,
	}
	if c.bh, err = c.newBulkhead(l.Client); err != nil {
		return nil, err
	}
	c.faults = newFaults(l, o.faultSeed)
	if c.faults != nil && o.logger != nil {
		o.logger.Warn("outbound fault injection on", "system", l.Name, "faults", c.faults.desc)
	}
	c.transport = newTransport(l.Client, tlsConf)
	c.rt = c.transport
	if o.wrap != nil {
		c.rt = o.wrap(l.Name, c.transport)
	}
	c.entry = callStage{c}
	for _, ob := range o.observers {
		if t, ok := ob.(observe.Tracer); ok {
			c.rt = t.TraceAttempt(l.Name, c.rt)
			c.entry = t.TraceCall(l.Name, c.entry)
		}
	}
	c.cb = newBreaker(l.Name, l.Client, c.localChanged)
	if l.Client.BreakerScope == "fleet" {
		if c.cb, err = o.fleetCircuit(l, c.cb); err != nil {
			return nil, err
		}
		if sr, ok := c.cb.(StateReporter); ok {
			c.toCircuit = sr.ReportStates(c.breakerChanged)
		}
	}
	c.checkRedirect = redirectPolicy(l.Client, base)
	c.outer = &http.Client{Transport: pipelineTransport{c}, CheckRedirect: useLastResponse}
	return c, nil
}

// String names the client and its redacted base URL, so that printing a
// Client never shows its settings' credentials.
func (c *Client) String() string {
	return "outbound client " + c.name + " (" + redact.BaseURL(c.base.String()) + ")"
}

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// Name returns the system's name.
func (c *Client) Name() string { return c.name }

// Config returns the system's effective settings.
func (c *Client) Config() config.Client { return c.cfg }

// BaseURL returns a copy of the system's base URL.
func (c *Client) BaseURL() *url.URL { u := *c.base; return &u }

// HTTPClient returns an *http.Client whose every request runs the whole
// pipeline, as [Client.Do] does, for generated SDKs and libraries that
// accept one. Its Timeout is zero: CALL_TIMEOUT and the caller's budget
// bound each call, redirects and body included, as http.Client.Timeout
// would. Redirects follow the system's policy inside the pipeline, within
// one bulkhead permit and one deadline; the *http.Client itself never
// follows one, so a library's Jar sees only the last hop. Relative URLs
// resolve against BASE_URL.
//
// A call refused before anything was sent, by an open breaker, a full
// bulkhead or a spent budget, is not an error here but a made-up 503 that
// tells SDKs not to retry (X-Should-Retry and Stripe-Should-Retry: false)
// and says why in [RefusedHeader]; [Refusal] turns its header back into
// the [*Error] that Do returns. SDKs retry errors with their own backoff,
// so an error would turn a fast refusal into seconds (docs/sdk.md).
//
// Its other errors are *url.Error, as any http.Client's, wrapping an
// [*Error] (errors.As finds it). net/http renders the request's URL in it as the
// caller wrote it (password hidden); every URL the pipeline adds (BASE_URL,
// redirects) is redacted, so use relative URLs for secret-bearing bases.
//
// Each call returns a new *http.Client sharing the pipeline, so that a
// library that sets its Timeout or wraps its Transport changes only its
// own copy.
func (c *Client) HTTPClient() *http.Client {
	hc := *c.outer
	return &hc
}

// Do sends req through the pipeline and returns the response, or an
// [*Error] naming the system, the stage and the cause (always that type,
// never wrapped, its URL redacted). A relative req.URL ("/v1/stock/42",
// "stock/42") is joined to BASE_URL's path.
//
// As with http.Client.Do, a non-2xx status is not an error, the caller
// must close the body, and the body is read under the call's deadline:
// CALL_TIMEOUT, or the caller's remaining budget less 100ms if that is
// sooner. Redirects followed by Do stay inside that one deadline and one
// bulkhead permit.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.entry.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// callStage is the entry of one call: the whole pipeline, redirects
// included, as a RoundTripper that observers may wrap ([observe.Tracer]).
type callStage struct{ c *Client }

func (s callStage) RoundTrip(req *http.Request) (*http.Response, error) {
	return s.c.call(req, s.c.followRedirects)
}

// followRedirects sends req through the redirect engine (follow, over
// the retry stage). The retry stage's *Error already names the method and
// the redacted URL; an error of the engine itself (an unparsable
// Location, say) is wrapped in one.
func (c *Client) followRedirects(req *http.Request) (*http.Response, error) {
	resp, err := c.follow(req)
	if err == nil {
		return resp, nil
	}
	if e, ok := err.(*Error); ok {
		return nil, e
	}
	return nil, &Error{System: c.name, Op: observe.OpTransport, Method: req.Method, URL: redactedURL(req), Err: err}
}

// pipelineTransport is HTTPClient's transport: the whole pipeline per
// request, redirects included.
type pipelineTransport struct{ c *Client }

func (p pipelineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.c.entry.RoundTrip(req)
	if err == nil {
		// Only the pipeline may mark a response refused.
		delete(resp.Header, RefusedHeader)
		return resp, nil
	}
	if e, ok := err.(*Error); ok {
		if reason := refusedReason(e); reason != "" {
			// An SDK would retry an error; it stops on this response.
			return p.c.refusal(req, e, reason), nil
		}
		// net/http wraps it in a *url.Error that names the method and
		// the URL: the *Error need not say them twice. A copy, since the
		// observers may hold the original.
		quiet := *e
		quiet.inURLError = true
		return nil, &quiet
	}
	return resp, err
}

// CloseIdleConnections closes the system transport's idle connections, so
// that HTTPClient().CloseIdleConnections() works as with any http.Client:
// the next request opens a new connection, with a new TLS handshake.
func (p pipelineTransport) CloseIdleConnections() { p.c.transport.CloseIdleConnections() }
