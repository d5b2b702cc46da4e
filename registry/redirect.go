package registry

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/outbound-go/outbound/config"
)

// redirectPolicy returns the CheckRedirect of a system: "none" returns
// every 3xx to the caller, "same-host" follows only to the base URL's
// scheme and host, "any" follows anywhere; all stop after MaxRedirects.
// A redirect that is not followed comes back to the caller as the 3xx
// response, not as an error.
//
// Credentials never follow a redirect to another origin: once a call has
// left the scheme and host (port included) of its first request,
// Authorization, Proxy-Authorization, Cookie and Idempotency-Key are
// dropped from it for the rest of its redirects. net/http drops
// Authorization and Cookie only for another domain, and it compares host
// names without their ports, so 127.0.0.1:8443 -> 127.0.0.1:9000 would
// keep them; an Idempotency-Key minted for one system means nothing to
// another.
func redirectPolicy(c config.Client, base *url.URL) func(req *http.Request, via []*http.Request) error {
	mode, limit := c.FollowRedirects, c.MaxRedirects
	return func(req *http.Request, via []*http.Request) error {
		if mode == "none" {
			return http.ErrUseLastResponse
		}
		resolveRedirect(req)
		// via holds the requests sent so far; following this redirect
		// would be redirect number len(via).
		if len(via) > limit || (mode == "same-host" && !sameHost(originOf(req.URL, base), base)) {
			return http.ErrUseLastResponse
		}
		if leftOrigin(req, via, base) {
			for _, h := range redirectSensitive {
				req.Header.Del(h)
			}
		}
		return nil
	}
}

// useLastResponse is HTTPClient's CheckRedirect: the pipeline has followed
// what the policy allows already, so a 3xx that reaches net/http is the
// caller's.
func useLastResponse(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// redirectSensitive are the request headers that never follow a redirect
// to another origin.
var redirectSensitive = []string{"Authorization", "Proxy-Authorization", "Cookie", "Cookie2", "Idempotency-Key"}

// resolveRedirect makes req's URL absolute when it is not. A request sent
// through HTTPClient() with a relative URL (resolved against BASE_URL by
// the pipeline) has its redirects parsed by net/http against that
// relative URL, so they are relative too; the Location is resolved here
// against the URL the previous hop was actually sent to.
func resolveRedirect(req *http.Request) {
	if req.URL.Host != "" || req.Response == nil || req.Response.Request == nil || req.Response.Request.URL == nil {
		return
	}
	if u, err := req.Response.Request.URL.Parse(req.Response.Header.Get("Location")); err == nil && u.Host != "" {
		req.URL = u
	}
}

// originOf returns u, or base for a URL without a host: the pipeline
// resolves those against BASE_URL.
func originOf(u, base *url.URL) *url.URL {
	if u.Host == "" {
		return base
	}
	return u
}

// leftOrigin reports whether req, or any redirect before it, goes to
// another origin than the call's first request.
func leftOrigin(req *http.Request, via []*http.Request, base *url.URL) bool {
	origin := originOf(via[0].URL, base)
	if !sameHost(originOf(req.URL, base), origin) {
		return true
	}
	for _, r := range via[1:] {
		if !sameHost(originOf(r.URL, base), origin) {
			return true
		}
	}
	return false
}

// sameHost reports whether a and b have the same origin: scheme, host
// name (case-insensitively) and port, the default port of the scheme
// when none is given.
func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && hostPort(a) == hostPort(b)
}

func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// follow is the redirect engine of both entry points: it sends req (the
// call's request, under its capped context) through the retry stage and
// follows the redirects that checkRedirect (the system's policy) allows,
// as http.Client.Do would with that CheckRedirect and no Jar, all inside
// the call's one permit and one deadline. It is written out rather than
// borrowed from an http.Client because the borrowed one costs four
// allocations per call even when no redirect comes (the redirect list,
// a copy of the first request's header and the closure that copies it,
// and its own per-hop checks); here a call without a redirect pays
// nothing for them.
//
// The rules are http.Client's: 301, 302 and 303 turn any method but GET
// and HEAD into GET and drop the body and its headers; 307 and 308 keep
// the method and replay the body with GetBody (without GetBody, a request
// with a body gets the 3xx back); a 3xx without Location is the answer;
// the first request's headers are copied to each hop, the credentials
// only to the same domain or its subdomains (the policy drops them for
// any other origin anyway); Referer is set as net/http sets it; the body
// of a followed response is drained up to 2 KiB and closed.
func (c *Client) follow(req *http.Request) (*http.Response, error) {
	ch := chain{first: req, includeBody: true}
	budgeted := c.budgeted(req.Context()) // prepare set X-Time-Budget in first
	for {
		resp, err := c.hop(req, budgeted && req == ch.first)
		if err != nil {
			return nil, err
		}
		method, redirect, bodyOnHop := redirectBehavior(req.Method, resp, ch.first)
		if !redirect {
			return resp, nil
		}
		ch.includeBody = ch.includeBody && bodyOnHop
		closeBody(req)
		ch.via = append(ch.via, req)
		next, err := ch.next(req, resp, method)
		if err != nil {
			return nil, err // resp is closed
		}
		if next == nil {
			return resp, nil // no Location: resp is the answer
		}
		err = c.checkRedirect(next, ch.via)
		if err == http.ErrUseLastResponse {
			return resp, nil
		}
		const maxBodySlurpSize = 2 << 10
		if resp.ContentLength == -1 || resp.ContentLength <= maxBodySlurpSize {
			_, _ = io.CopyN(io.Discard, resp.Body, maxBodySlurpSize)
		}
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		req = next
	}
}

// chain is the state of follow's redirects.
type chain struct {
	first          *http.Request
	via            []*http.Request // the hops sent so far; nil until the first redirect
	initial        http.Header     // first's header, copied at the first redirect
	includeBody    bool            // no hop has dropped the body yet
	stripSensitive bool            // the chain left the first request's domain
}

// next builds the redirect that resp (the answer to req) asks for, with
// method: nil when resp has no Location (resp is the answer), an error
// when the Location does not parse or the body cannot be produced again
// (resp is then closed and nil returned with the error).
func (ch *chain) next(req *http.Request, resp *http.Response, method string) (*http.Request, error) {
	loc := resp.Header.Get("Location")
	if loc == "" {
		// A 3xx without Location is an answer (net/http issues 17773
		// and 49281).
		return nil, nil
	}
	u, err := req.URL.Parse(loc)
	if err != nil {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("failed to parse Location header %q: %v", loc, err)
	}
	host := ""
	if req.Host != "" && req.Host != req.URL.Host {
		// A custom Host survives a relative redirect (net/http issue
		// 22233).
		if lu, _ := url.Parse(loc); lu != nil && !lu.IsAbs() {
			host = req.Host
		}
	}
	first := ch.first
	next := (&http.Request{Method: method, Response: resp, URL: u, Header: make(http.Header), Host: host}).
		WithContext(first.Context())
	// Cancel is carried over as net/http's redirect engine does, for the
	// callers that still set it.
	next.Cancel = first.Cancel //lint:ignore SA1019 parity with net/http's redirects
	if ch.includeBody && first.GetBody != nil {
		if next.Body, err = first.GetBody(); err != nil {
			_ = resp.Body.Close()
			return nil, err
		}
		next.GetBody = first.GetBody
		next.ContentLength = first.ContentLength
	}
	if ch.initial == nil {
		ch.initial = first.Header.Clone()
	}
	if !ch.stripSensitive && first.URL.Host != u.Host && !domainOrSubdomain(u.Hostname(), first.URL.Hostname()) {
		ch.stripSensitive = true
	}
	copyHeaders(next.Header, ch.initial, ch.stripSensitive, !ch.includeBody)
	if ref := refererForURL(req.URL, u, next.Header.Get("Referer")); ref != "" {
		next.Header.Set("Referer", ref)
	}
	return next, nil
}

// hop sends one hop through the retry stage after the checks http.Client
// makes before its RoundTripper: a URL and no RequestURI, a header map,
// and the URL's userinfo as Basic auth. Only a request that needs a
// header of its own is copied. budgeted: req carries the call's
// X-Time-Budget already (set by prepare).
func (c *Client) hop(req *http.Request, budgeted bool) (*http.Response, error) {
	switch {
	case req.URL == nil:
		closeBody(req)
		return nil, errors.New("http: nil Request.URL")
	case req.RequestURI != "":
		closeBody(req)
		return nil, errors.New("http: Request.RequestURI can't be set in client requests")
	}
	if u := req.URL.User; req.Header == nil || (u != nil && req.Header.Get("Authorization") == "") {
		r2 := *req
		r2.Header = req.Header.Clone()
		if r2.Header == nil {
			r2.Header = make(http.Header)
		}
		if u != nil && r2.Header.Get("Authorization") == "" {
			pw, _ := u.Password()
			r2.SetBasicAuth(u.Username(), pw)
		}
		req = &r2
	}
	resp, err := c.retry(req, budgeted)
	if err != nil {
		return nil, err
	}
	if resp.Body == nil {
		resp.Body = http.NoBody // as http.Client guarantees
	}
	return resp, nil
}

// redirectBehavior is net/http's: whether resp redirects, with which
// method, and whether the body goes along.
func redirectBehavior(method string, resp *http.Response, first *http.Request) (next string, redirect, includeBody bool) {
	switch resp.StatusCode {
	case 301, 302, 303:
		next, redirect = method, true
		if method != http.MethodGet && method != http.MethodHead {
			next = http.MethodGet
		}
	case 307, 308:
		next, redirect, includeBody = method, true, true
		if first.GetBody == nil && first.Body != nil && first.Body != http.NoBody {
			// The body cannot be sent again: the 3xx is the answer.
			redirect = false
		}
	}
	return next, redirect, includeBody
}

// copyHeaders copies the first request's headers to a redirect, without
// the credentials once the call left the first domain, and without the
// body's headers once the body was dropped, as net/http does.
func copyHeaders(dst, initial http.Header, stripSensitive, stripBody bool) {
	for k, vv := range initial {
		switch http.CanonicalHeaderKey(k) {
		case "Authorization", "Www-Authenticate", "Cookie", "Cookie2", "Proxy-Authorization", "Proxy-Authenticate":
			if stripSensitive {
				continue
			}
		case "Content-Encoding", "Content-Language", "Content-Location", "Content-Type":
			if stripBody {
				continue
			}
		}
		dst[k] = vv
	}
}

// domainOrSubdomain is net/http's isDomainOrSubdomain: whether sub is
// parent or a subdomain of it.
func domainOrSubdomain(sub, parent string) bool {
	if sub == parent {
		return true
	}
	if strings.ContainsAny(sub, ":%") {
		return false // an IPv6 address
	}
	return strings.HasSuffix(sub, parent) && sub[len(sub)-len(parent)-1] == '.'
}

// refererForURL is net/http's: the Referer of a redirect from last to
// next, none from https to http.
func refererForURL(last, next *url.URL, explicit string) string {
	if last.Scheme == "https" && next.Scheme == "http" {
		return ""
	}
	if explicit != "" {
		return explicit
	}
	ref := last.String()
	if last.User != nil {
		ref = strings.Replace(ref, last.User.String()+"@", "", 1)
	}
	return ref
}
