// Package redirect follows the redirects of one call under a system's
// policy (FOLLOW_REDIRECTS, MAX_REDIRECTS), with net/http's rules, inside
// the call's one permit and one deadline: the registry hands it a sender
// of one hop (its retry stage) and gets the last response back.
//
// Policy, strictest first:
//
//   - none: every 3xx is the caller's answer.
//   - same-host (the baseline): a redirect is followed only to BASE_URL's
//     origin and under its path ("/v1/up" -> "/v1/down"); one that leaves
//     either ("/v1/up" -> "/admin/secret") is the caller's answer, not
//     followed: the caller's credentials are for the API under BASE_URL,
//     not for another API of the same host.
//   - any: every redirect is followed; from the first hop that leaves
//     BASE_URL's origin or path on, the [origin.Credentials] and
//     X-Time-Budget are dropped, for the rest of the call.
//
// Each policy stops after MAX_REDIRECTS: the last 3xx is the answer.
//
// The engine is written out rather than borrowed from an http.Client:
// http.Client.Do allocates its redirect list, a copy of the first
// request's header and the closure that copies it on every call, even
// one that is never redirected (4 allocations and about 230 B per call on
// the registry's call benchmark); here a call without a redirect pays
// nothing for them. The rules are http.Client's otherwise: 301, 302 and
// 303 turn any method but GET and HEAD into GET and drop the body and its
// headers; 307 and 308 keep the method and replay the body with GetBody
// (without GetBody, a request with a body gets the 3xx back); a 3xx
// without Location is the answer; the first request's headers are copied
// to each hop; Referer is set as net/http sets it (none from https to
// http); a URL's userinfo is sent as Basic auth. The body of a followed
// response is drained within internal/drain's bounds and closed.
package redirect

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/outbound-go/outbound/internal/drain"
	"github.com/outbound-go/outbound/internal/origin"
)

// Policy is one system's redirect policy. It is immutable and safe for
// concurrent use.
type Policy struct {
	mode  string // none, same-host or any
	limit int    // redirects followed in one call at most
	base  *url.URL
}

// New returns the policy of a system whose BASE_URL is base: mode is
// FOLLOW_REDIRECTS ("none", "same-host" or "any"; config validated it),
// limit MAX_REDIRECTS.
func New(mode string, limit int, base *url.URL) *Policy {
	return &Policy{mode: mode, limit: limit, base: base}
}

// Redirected reports whether resp, the answer to a call's first hop, may
// be a redirect the policy follows: a 301, 302, 303, 307 or 308 and a
// policy other than none. A call whose answer is not pays nothing more.
func (p *Policy) Redirected(resp *http.Response) bool {
	if p.mode == "none" {
		return false
	}
	switch resp.StatusCode {
	case 301, 302, 303, 307, 308:
		return true
	}
	return false
}

// Follow follows the redirects the policy allows from resp, the answer
// to first (the call's first hop), sending each hop through send. It
// returns the last response, whose body the caller must close, or the
// first error: send's as it is, or one of the engine's own (a Location
// that does not parse, a body that cannot be produced again). Every
// response it does not return is drained and closed, and every request
// body it sent is closed.
func (p *Policy) Follow(first *http.Request, resp *http.Response, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	ch := chain{p: p, first: first, includeBody: true}
	req := first
	for {
		method, redirect, bodyOnHop := redirectBehavior(req.Method, resp, first)
		if !redirect {
			return resp, nil
		}
		ch.includeBody = ch.includeBody && bodyOnHop
		closeBody(req)
		ch.via = append(ch.via, req)
		next, err := ch.next(req, resp, method)
		if err != nil {
			_ = resp.Body.Close()
			return nil, err
		}
		if next == nil || !ch.allow(next) {
			return resp, nil // no Location, or not followed: resp is the answer
		}
		_ = drain.Close(resp.Body, resp.ContentLength, nil)
		req = next
		if resp, err = ch.hop(req, send); err != nil {
			return nil, err
		}
	}
}

// chain is the state of one call's redirects.
type chain struct {
	p           *Policy
	first       *http.Request
	via         []*http.Request // the hops sent so far; nil until the first redirect
	initial     http.Header     // first's header, copied at the first redirect
	includeBody bool            // no hop has dropped the body yet
	left        bool            // a hop left BASE_URL's origin or path: credentials stay behind
}

// hop sends one hop after the checks http.Client makes before its
// RoundTripper: a URL, no RequestURI, a header map, and the URL's
// userinfo as Basic auth. Only a request that needs a header of its own
// is copied.
func (ch *chain) hop(req *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
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
		origin.BasicAuth(r2.Header, u)
		req = &r2
	}
	resp, err := send(req)
	if err != nil {
		return nil, err
	}
	if resp.Body == nil {
		resp.Body = http.NoBody // as http.Client guarantees
	}
	return resp, nil
}

// allow applies the policy to next, the redirect the chain's last
// response asks for: whether it is followed, and, when it is followed
// after the chain left BASE_URL, without the credentials.
func (ch *chain) allow(next *http.Request) bool {
	if len(ch.via) > ch.p.limit {
		return false
	}
	under := origin.Under(next.URL, ch.p.base)
	if ch.p.mode == "same-host" && !under {
		return false
	}
	if !under {
		ch.left = true
	}
	if ch.left {
		origin.StripCredentials(next.Header)
	}
	return true
}

// next builds the redirect that resp (the answer to req) asks for, with
// method: nil when resp has no Location (resp is the answer), an error
// when the Location does not parse or the body cannot be produced again.
func (ch *chain) next(req *http.Request, resp *http.Response, method string) (*http.Request, error) {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil, nil // a 3xx without Location is an answer (go.dev/issue/17773)
	}
	u, err := req.URL.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("failed to parse Location header %q: %v", loc, err)
	}
	host := ""
	if req.Host != "" && req.Host != req.URL.Host {
		// A custom Host survives a relative redirect (go.dev/issue/22233).
		if lu, _ := url.Parse(loc); lu != nil && !lu.IsAbs() {
			host = req.Host
		}
	}
	first := ch.first
	next := (&http.Request{Method: method, Response: resp, URL: u, Header: make(http.Header), Host: host}).
		WithContext(first.Context())
	if ch.includeBody && first.GetBody != nil {
		if next.Body, err = first.GetBody(); err != nil {
			return nil, err
		}
		next.GetBody = first.GetBody
		next.ContentLength = first.ContentLength
	}
	if ch.initial == nil {
		ch.initial = first.Header.Clone()
	}
	copyHeaders(next.Header, ch.initial, !ch.includeBody)
	if ref := referer(req.URL, u, next.Header.Get("Referer")); ref != "" {
		next.Header.Set("Referer", ref)
	}
	return next, nil
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
			redirect = false // the body cannot be sent again: the 3xx is the answer
		}
	}
	return next, redirect, includeBody
}

// copyHeaders copies the first request's headers to a redirect, without
// the body's headers once the body was dropped, as net/http does. The
// credentials are copied here and dropped by allow when the chain left
// BASE_URL, whatever domain it went to.
func copyHeaders(dst, initial http.Header, stripBody bool) {
	for k, vv := range initial {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Encoding", "Content-Language", "Content-Location", "Content-Type":
			if stripBody {
				continue
			}
		}
		dst[k] = vv
	}
}

// referer is net/http's: the Referer of a redirect from last to next,
// none from https to http, and never with userinfo.
func referer(last, next *url.URL, explicit string) string {
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

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
