package registry

import (
	"crypto/tls"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/force"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/internal/ratelimit"
	"github.com/outbound-go/outbound/internal/redact"
	"github.com/outbound-go/outbound/internal/refusal"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// Client is the resilient HTTP client of one external system. Use [Do],
// or [HTTPClient] for libraries that take an *http.Client; both run the
// same pipeline. A Client is safe for concurrent use.
type Client struct {
	name      string
	base      *url.URL
	closed    *atomic.Bool // the registry's
	observers []observe.Observer
	timed     bool // observers need the time of calls and attempts

	tlsConf     *tls.Config // the TLS of every pool the client builds
	owner       permitOwner // what the calls' permits give back to
	certs       *certSource // the client certificate's source; nil without one
	bh          *bulkhead.Bulkhead
	cb          Circuit                        // the breaker stage's state: the system's gobreaker, or its fleet's
	rule        *breaker.Rule                  // when the system's own gobreaker trips; a change of settings sets it
	force       force.Override                 // an operator's override of the breaker: its own, or its fleet's
	toCircuit   func(from, to gobreaker.State) // where the gobreaker's changes go when cb reports states; nil: the observers
	retryBudget *retryBudget
	faults      *faultInjector // drills only (OUTBOUND_FAULTS=on); nil: none
	lend        requestPool    // the requests of first attempts that carry X-Time-Budget

	// pol is what a call reads of the settings: the system's policy and
	// its routes', one immutable snapshot that a change of settings
	// replaces whole (live.go). A call loads it once, at its entry.
	pol     atomic.Pointer[policySet]
	opts    *options          // the registry's options, for the stages a change rebuilds
	live    sync.Mutex        // serialises changes of pol
	retired []*retiredPool    // pools a change of connection settings replaced, draining; under live
	entry   http.RoundTripper // one call through the whole pipeline, maybe traced
	outer   *http.Client      // HTTPClient()'s template: the whole pipeline per request, never follows itself

	stats      counters
	pausedTill atomic.Int64 // the end of the last pause told to the observers, Unix ns
}

func newClient(l config.Loaded, o *options, closed *atomic.Bool) (*Client, error) {
	base, err := url.Parse(l.Client.BaseURL)
	if err != nil {
		return nil, err
	}
	interval := o.certInterval
	if interval == 0 {
		interval = certCheckInterval
	}
	tlsConf, certs, err := newTLSConfig(l, interval)
	if err != nil {
		return nil, err
	}
	c := &Client{
		name: l.Name, base: base, closed: closed, opts: o,
		observers: o.observers, timed: len(o.observers) > 0,
		tlsConf: tlsConf, certs: certs,
		retryBudget: newRetryBudget(l.Client.RetryBudgetRatio, l.Client.RetryBudgetMinPerSec),
		faults:      newFaultInjector(l, o.faultSeed),
	}
	if c.bh, err = newBulkhead(l.Name, l.Client, o.observers); err != nil {
		return nil, err
	}
	c.owner = permitOwner{Bulkhead: c.bh, Closed: closed, Pool: pipelineTransport{c}, ReadError: c.readError}
	if c.faults != nil && o.logger != nil {
		o.logger.Warn("outbound fault injection on", "outbound.system", l.Name, "outbound.faults", c.faults.describe())
	}
	c.rule = breaker.NewRule(l.Client)
	local := newLocalCircuit(l.Name, l.Client, c.rule, c.localChanged)
	c.cb = local
	if l.Client.BreakerScope == "fleet" {
		if c.cb, c.toCircuit, err = o.fleetCircuit(l, local, fleetReports{c.breakerChanged, c.forceChanged}); err != nil {
			return nil, err
		}
		if f, ok := c.cb.(Forcer); ok {
			c.force.Share(f)
		}
	}
	var quota Quota
	if r := l.Client.Rate(); r.Limited() {
		local := ratelimit.NewLocal(r)
		quota = local
		if l.Client.RateScope == "fleet" {
			if quota, err = o.fleetQuota(l, local, func(until time.Time) { c.paused(until, 0) }); err != nil {
				return nil, err
			}
		}
	}
	ps, err := c.policies(l, quota, nil)
	if err != nil {
		return nil, err
	}
	c.pol.Store(ps)
	c.entry = callEntry{c}
	each(o.observers, func(t observe.Tracer) { c.entry = t.TraceCall(l.Name, c.entry) })
	c.outer = &http.Client{Transport: pipelineTransport{c}, CheckRedirect: useLastResponse}
	return c, nil
}

// pool is a system's transport, with its pool of connections, and the
// innermost stages over it, shared by the system's routes: the transport
// (maybe wrapped and traced) and the drills' fault stage. A change of
// connection settings builds a new one (samePool).
type pool struct {
	transport *http.Transport
	inner     attemptStage
}

// newPool builds the pool of settings l.
func (c *Client) newPool(l config.Loaded) *pool {
	t := newTransport(withHeaderTimeout(l), c.tlsConf)
	return &pool{transport: t, inner: c.attemptBase(c.opts, t)}
}

// samePool says whether the calls of settings l can run on p: the
// settings it was built with (old) connect the same way, and its header
// timeout is at least l's longest READ_TIMEOUT (a shorter one is cut by
// readStage).
func samePool(p *pool, old, l config.Loaded) bool {
	a, b := old.Client, l.Client
	return a.ConnectTimeout == b.ConnectTimeout && a.TLSHandshakeTimeout == b.TLSHandshakeTimeout &&
		a.IdleConnTimeout == b.IdleConnTimeout && headerTimeout(l) <= p.transport.ResponseHeaderTimeout
}

// attemptBase builds the innermost stages over t.
func (c *Client) attemptBase(o *options, t *http.Transport) attemptStage {
	var rt http.RoundTripper = t
	if o.wrap != nil {
		rt = o.wrap(c.name, rt)
	}
	traced := false
	for _, ob := range o.observers {
		if t, ok := ob.(observe.Tracer); ok {
			if !traced {
				rt, traced = withClassify(rt), true
			}
			rt = t.TraceAttempt(c.name, rt)
		}
	}
	var s attemptStage = &transportStage{rt: rt}
	if c.faults != nil {
		s = &faultStage{f: c.faults, next: s}
	}
	return s
}

// bareTransport reports whether the system's attempts go to its transport
// with no wrapper (WithTransportWrapper) and no tracer (observe.Tracer) in
// between.
func (c *Client) bareTransport() bool {
	if c.opts.wrap != nil {
		return false
	}
	for _, ob := range c.opts.observers {
		if _, ok := ob.(observe.Tracer); ok {
			return false
		}
	}
	return true
}

// buildChain assembles the stages of policy p (the system's own, or one
// of its routes') over base, inner to outer, from its settings: a stage
// whose setting is off is not in the chain. The order is the pipeline's
// (doc.go): adaptive, redirect, retry, hedge or report, breaker, rate
// (the route's own, then the system's), read, fault, transport.
func (c *Client) buildChain(pl *pool, p *route, quota Quota) callStage {
	s := pl.inner
	if p.cfg.ReadTimeout < pl.transport.ResponseHeaderTimeout {
		s = &readStage{timeout: p.cfg.ReadTimeout, next: s}
	}
	if quota != nil {
		s = &rateStage{c: c, q: quota, upstream: true, next: s}
	}
	if p.quota != nil {
		s = &rateStage{c: c, q: p.quota, next: s}
	}
	s = &breakerStage{c: c, cb: p.cb, next: s}
	h := newHedgePolicy(p.cfg)
	// A first attempt's request is lent (internal/lentRequest) only when
	// nothing can hold it after the call: no hedge (a losing copy may still
	// be in flight), no tracer and no wrapper (code of the caller's).
	p.lend = h == nil && c.bareTransport()
	switch {
	case h != nil:
		s = &hedgeStage{c: c, cb: p.cb, policy: h, next: s}
	case c.timed:
		s = &reportStage{c: c, next: s}
	}
	var cs callStage = &retryStage{c: c, retries: p.cfg.Retries, idempotent: p.idempotent, next: s}
	if p.cfg.FollowRedirects != "none" {
		cs = &redirectStage{mode: p.cfg.FollowRedirects, limit: p.cfg.MaxRedirects, base: c.base, next: cs}
	}
	if c.bh.Adaptive() {
		cs = &adaptiveStage{bh: c.bh, next: cs}
	}
	return cs
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
func (c *Client) Config() config.Client { return c.pol.Load().sys.cfg }

// BaseURL returns a copy of the system's base URL.
func (c *Client) BaseURL() *url.URL { u := *c.base; return &u }

// HTTPClient returns an *http.Client whose every request runs the whole
// pipeline, as [Client.Do] does, for generated SDKs and libraries that
// accept one. Its Timeout is zero: CALL_TIMEOUT and the caller's budget
// bound each call, redirects and body included. Redirects follow the
// system's policy inside the pipeline; the *http.Client itself never
// follows one, so a library's Jar sees only the last hop. Relative URLs
// resolve against BASE_URL.
//
// It speaks to SDKs, which retry errors with their own backoff: a refusal
// (breaker, bulkhead, rate limit, spent budget) is a made-up 503 that
// tells them not to retry ([RefusedHeader], [Refusal]), and so is an
// error status outbound retried and gave up on; a replayable call it
// retried and gave up on with an error (a timeout, a transport error) is
// a made-up 504 or 502 that says so ([GaveUpHeader], [GaveUp]). Its other
// errors are *url.Error wrapping an [*Error]; every URL the pipeline adds
// (BASE_URL, redirects) is redacted (docs/sdk.md).
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
// bulkhead permit. The response's Request is the call's request (req with
// its URL joined to BASE_URL, under the call's deadline), or the last
// hop's after a redirect; each attempt sends a copy of it with its own
// X-Time-Budget.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.entry.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// callEntry is the entry of one call: the whole pipeline, redirects
// included, as a RoundTripper that observers may wrap (observe.Tracer).
type callEntry struct{ c *Client }

func (e callEntry) RoundTrip(req *http.Request) (*http.Response, error) { return e.c.call(req) }

// pipelineTransport is HTTPClient's transport: the whole pipeline per
// request, redirects included, and refusals answered with a response.
type pipelineTransport struct{ c *Client }

func (p pipelineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.c.entry.RoundTrip(req)
	if err == nil {
		if p.c.gaveUpOn(req, resp) {
			refusal.Final(resp) // one retry layer: the SDK's would multiply ours
		}
		return resp, nil
	}
	if e, ok := err.(*Error); ok {
		if reason := e.Op.Reason(); reason != "" {
			// An SDK would retry an error; it stops on this response.
			return p.c.refusal(req, e, reason), nil
		}
		if p.c.gaveUpWith(req, e) {
			// One retry layer: the SDK would start over on an error.
			return p.c.gaveUp(req, e), nil
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

// gaveUpWith reports whether e ended a call the retry stage retried and
// gave up on with an error: the system retries, req was safe to replay,
// an attempt was sent, and e's op is one a retry may cure (a timeout of
// a phase, a transport error), or CALL_TIMEOUT once a retry was sent (a
// CALL_TIMEOUT that ends the first attempt, or a redirect hop, is no
// decision of the retry stage). A request that was not replayable keeps
// the SDK's own judgement.
func (c *Client) gaveUpWith(req *http.Request, e *Error) bool {
	p := c.policy(req)
	return p.cfg.Retries > 0 && e.Attempts > 0 && (e.Op.Retryable() || e.Op == observe.OpCallTimeout && e.Attempts > 1) &&
		replayable(req, p.idempotent)
}

// gaveUpOn reports whether resp is an error status the retry stage
// retried and gave up on (retries ran out, the retry throttle or the
// deadline said no): the system retries, req was safe to replay, and the
// status was one to retry. A request that was not replayable keeps the
// SDK's own judgement.
func (c *Client) gaveUpOn(req *http.Request, resp *http.Response) bool {
	p := c.policy(req)
	return p.cfg.Retries > 0 && resp.StatusCode >= 400 && replayable(req, p.idempotent) &&
		policy.RetryStatus(resp.StatusCode, resp.Header)
}

// CloseIdleConnections closes the system transport's idle connections, so
// that HTTPClient().CloseIdleConnections() works as with any http.Client:
// the next request opens a new connection, with a new TLS handshake.
func (p pipelineTransport) CloseIdleConnections() {
	p.c.pol.Load().pool.transport.CloseIdleConnections()
}

// useLastResponse is HTTPClient's CheckRedirect: the pipeline has followed
// what the policy allows already, so a 3xx that reaches net/http is the
// caller's.
func useLastResponse(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// readError is the error of a read of a response body that op ended.
func (c *Client) readError(op observe.Op, cause error) error {
	return &Error{System: c.name, Op: op, Err: cause}
}
