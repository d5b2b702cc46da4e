package registry

import (
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
