package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/redact"
	"github.com/sony/gobreaker/v2"
)

// Client is the resilient HTTP client of one external system. Use [Do],
// or [HTTPClient] for libraries that take an *http.Client; both run the
// same pipeline. A Client is safe for concurrent use.
type Client struct {
	name      string
	cfg       config.Client
	loaded    config.Loaded
	vars      func() []config.Var // loaded.Vars(), computed once, on the first Status
	base      *url.URL
	transport *http.Transport
	rt        http.RoundTripper // transport, maybe wrapped for tracing
	bh        *bulkhead.Bulkhead
	cb        *gobreaker.CircuitBreaker[*http.Response]
	budget    *retryBudget
	observers []Observer
	closed    *atomic.Bool // the registry's

	redirects http.Client  // Do's engine: follows redirects inside one permit and one deadline
	outer     *http.Client // HTTPClient(): the whole pipeline per request

	stats counters
}

type counters struct {
	calls, ok, retries, gaveUp, breakerRejected, budgetRejected, retryBudgetDenied, capped atomic.Uint64
}

func newClient(l config.Loaded, o *options, closed *atomic.Bool, tlsConf *tls.Config) (*Client, error) {
	base, err := url.Parse(l.Client.BaseURL)
	if err != nil {
		return nil, err
	}
	bh, err := bulkhead.New(int64(l.Client.MaxConcurrent), l.Client.BulkheadMaxWait)
	if err != nil {
		return nil, err
	}
	c := &Client{
		name:      l.Name,
		cfg:       l.Client,
		loaded:    l,
		vars:      sync.OnceValue(l.Vars),
		base:      base,
		bh:        bh,
		budget:    newRetryBudget(l.Client.RetryBudgetRatio, l.Client.RetryBudgetMinPerSec),
		observers: o.observers,
		closed:    closed,
	}
	c.transport = newTransport(l.Client, tlsConf)
	c.rt = c.transport
	if o.wrap != nil {
		c.rt = o.wrap(l.Name, c.transport)
	}
	c.cb = newBreaker(l.Name, l.Client, c.breakerChanged)
	policy := redirectPolicy(l.Client, base)
	c.redirects = http.Client{Transport: retryTransport{c}, CheckRedirect: policy}
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
// Its errors are *url.Error, as any http.Client's, wrapping an [*Error]
// (errors.As finds it). net/http renders the request's URL in it as the
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
	resp, err := c.call(req, c.followRedirects)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// followRedirects sends req through the redirect engine (an http.Client
// over the retry stage) and unwraps its *url.Error: the *Error inside
// already names the method and the redacted URL.
func (c *Client) followRedirects(req *http.Request) (*http.Response, error) {
	resp, err := c.redirects.Do(req)
	if err == nil {
		return resp, nil
	}
	ue, ok := err.(*url.Error)
	if !ok {
		return nil, err
	}
	if e, ok := ue.Err.(*Error); ok {
		return nil, e
	}
	// An error of the engine itself (an unparsable Location, say).
	return nil, &Error{System: c.name, Op: OpTransport, Method: req.Method, URL: redactedURL(req), Err: ue.Err}
}

// pipelineTransport is HTTPClient's transport: the whole pipeline per
// request, redirects included.
type pipelineTransport struct{ c *Client }

func (p pipelineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.c.call(req, p.c.followRedirects)
	if e, ok := err.(*Error); ok {
		// net/http wraps it in a *url.Error that names the method and
		// the URL: the *Error need not say them twice.
		e.inURLError = true
	}
	return resp, err
}

// CloseIdleConnections closes the system transport's idle connections, so
// that HTTPClient().CloseIdleConnections() works as with any http.Client:
// the next request opens a new connection, with a new TLS handshake.
func (p pipelineTransport) CloseIdleConnections() { p.c.transport.CloseIdleConnections() }

// retryTransport runs the retry, breaker and transport stages.
type retryTransport struct{ c *Client }

func (r retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.c.retryRoundTrip(req)
}

// call runs the bulkhead and budget stages around send.
func (c *Client) call(req *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if c.closed.Load() {
		closeBody(req)
		return nil, &Error{System: c.name, Op: OpClosed, Err: ErrClosed}
	}
	if req.URL != nil && req.URL.Host == "" && escapesBase(req.URL.Path) {
		closeBody(req)
		return nil, &Error{System: c.name, Op: OpRequest, Method: req.Method, Err: ErrPathEscapesBase}
	}
	ctx := req.Context()
	// Fast failures first: no allocation, no goroutine, no I/O.
	if err := capbudget.Check(ctx, capbudget.DefaultReserve); err != nil {
		closeBody(req)
		// A deadline that passed (whatever its cause) is a spent budget;
		// only a cancellation is the caller giving up.
		if ctx.Err() != context.Canceled {
			c.stats.budgetRejected.Add(1)
			err := &Error{System: c.name, Op: OpBudget, Err: capbudget.ErrExhausted}
			c.observeRejected(req, OutcomeBudgetSpent, err)
			return nil, err
		}
		c.observeRejected(req, OutcomeCanceled, err)
		return nil, &Error{System: c.name, Op: OpCanceled, Err: err}
	}
	if c.cb.State() == gobreaker.StateOpen {
		closeBody(req)
		c.stats.breakerRejected.Add(1)
		err := &Error{System: c.name, Op: OpBreaker, Err: errOpenState}
		c.observeRejected(req, OutcomeBreakerOpen, err)
		return nil, err
	}
	capped, cancel, budgetCapped := ctx, context.CancelFunc(nil), false
	if c.cfg.BulkheadMaxWait == 0 {
		if !c.bh.TryAcquire() {
			closeBody(req)
			err := &Error{System: c.name, Op: OpBulkhead, Err: bulkhead.ErrFull}
			c.observeRejected(req, OutcomeBulkheadFull, err)
			return nil, err
		}
	} else {
		// The wait for a permit counts against CALL_TIMEOUT: the deadline
		// starts before it.
		capped, cancel, budgetCapped = c.capCall(ctx)
		if err := c.bh.Acquire(capped); err != nil {
			cancel()
			closeBody(req)
			if !errors.Is(err, bulkhead.ErrFull) {
				// The caller cancelled while waiting: not a full bulkhead.
				e := &Error{System: c.name, Op: OpCanceled, Err: err}
				c.observeRejected(req, OutcomeCanceled, e)
				return nil, e
			}
			e := &Error{System: c.name, Op: OpBulkhead, Err: err}
			c.observeRejected(req, OutcomeBulkheadFull, e)
			return nil, e
		}
	}
	if cancel == nil {
		capped, cancel, budgetCapped = c.capCall(ctx)
	}
	c.stats.calls.Add(1)
	if budgetCapped {
		c.stats.capped.Add(1)
	}
	c.budget.call(time.Now())

	r2 := req.WithContext(capped)
	if r2.URL != nil && r2.URL.Host == "" {
		r2.URL = c.resolve(r2.URL)
		if u := c.base.User; u != nil && r2.Header.Get("Authorization") == "" {
			// BASE_URL's userinfo is Basic auth, on Do and HTTPClient
			// alike (http.Client sets it only for URLs it was given).
			r2.Header = r2.Header.Clone()
			if r2.Header == nil {
				r2.Header = make(http.Header)
			}
			pw, _ := u.Password()
			r2.SetBasicAuth(u.Username(), pw)
		}
	}
	if c.cfg.OmitTimeBudget && r2.Header.Get(capbudget.Header) != "" {
		// The system never receives the header, not even one the caller
		// set (a third party has no use for our budget).
		r2.Header = r2.Header.Clone()
		r2.Header.Del(capbudget.Header)
	}
	b := &body{p: permit{c: c, ctx: capped, cancel: cancel}}
	b.p.stop = context.AfterFunc(capped, b.p.release)

	resp, err := send(r2)
	if err != nil {
		b.p.done()
		return nil, err
	}
	if bodyless(resp) {
		// Nothing to read (HEAD, 204, 304, Content-Length: 0): callers
		// often skip Close here, so the body is closed (HTTP/2 has its
		// own empty body, not http.NoBody) and the permit and the
		// deadline end now.
		if resp.Body != nil && resp.Body != http.NoBody {
			_ = resp.Body.Close()
		}
		resp.Body = http.NoBody
		b.p.done()
		return resp, nil
	}
	b.rc = resp.Body
	b.length = resp.ContentLength
	resp.Body = b
	return resp, nil
}

// capCall caps ctx for one call: CALL_TIMEOUT, or the caller's remaining
// budget less the reserve if that is sooner (budgetCapped).
func (c *Client) capCall(ctx context.Context) (_ context.Context, _ context.CancelFunc, budgetCapped bool) {
	rem, ok := capbudget.Remaining(ctx, capbudget.DefaultReserve)
	capped, cancel := capbudget.CapWith(ctx, c.cfg.CallTimeout, capbudget.DefaultReserve)
	return capped, cancel, ok && rem < c.cfg.CallTimeout
}

// bodyless reports whether resp can have no body to read, whatever the
// protocol: HTTP/1 gives http.NoBody, HTTP/2 an empty body of its own.
func bodyless(resp *http.Response) bool {
	return resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified ||
		(resp.Request != nil && resp.Request.Method == http.MethodHead)
}

// resolve joins a relative URL to BASE_URL: the path is appended to the
// base path, and the query is the base query followed by the request's.
func (c *Client) resolve(rel *url.URL) *url.URL {
	u := *c.base
	u.Path = strings.TrimSuffix(c.base.Path, "/") + "/" + strings.TrimPrefix(rel.Path, "/")
	if rel.RawPath != "" || c.base.RawPath != "" {
		u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + "/" + strings.TrimPrefix(rel.EscapedPath(), "/")
	}
	switch {
	case c.base.RawQuery == "":
		u.RawQuery = rel.RawQuery
	case rel.RawQuery != "":
		u.RawQuery = c.base.RawQuery + "&" + rel.RawQuery
	}
	u.Fragment = ""
	return &u
}

// escapesBase reports whether a relative path climbs above its root with
// "..": joined to BASE_URL's path, "../admin" or "a/../../x" would leave
// it. Paths built from user input ("/stock/"+isbn) must not reach another
// API of the same host.
func escapesBase(p string) bool {
	if !strings.Contains(p, "..") {
		return false
	}
	depth := 0
	for p != "" {
		var seg string
		seg, p, _ = strings.Cut(p, "/")
		switch {
		case seg == "" || seg == ".":
		case seg == "..":
			if depth--; depth < 0 {
				return true
			}
		case strings.HasPrefix(seg, "..;") || strings.HasPrefix(seg, `..\`):
			// "..;" (Tomcat, Spring) and "..\" (proxies that turn \
			// into /) climb too on some servers: refuse them outright.
			return true
		default:
			depth++
		}
	}
	return false
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

func (c *Client) breakerChanged(from, to gobreaker.State) {
	for _, o := range c.observers {
		o.ObserveBreaker(c.name, breakerState(from), breakerState(to))
	}
}

func (c *Client) observeRejected(req *http.Request, out Outcome, err error) {
	for _, o := range c.observers {
		o.ObserveCall(CallEvent{System: c.name, Method: req.Method, Err: err, Outcome: out})
	}
}
