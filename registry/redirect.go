package registry

import (
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/outbound-go/outbound/observe"
)

// redirectStage follows a call's redirects under the system's policy
// (FOLLOW_REDIRECTS, MAX_REDIRECTS), each hop through the retry stage,
// inside the call's one permit and one deadline. It is in the chain
// unless FOLLOW_REDIRECTS is none, and a call whose answer is not a
// redirect pays nothing for it.
//
// The rules of following are net/http's own: once the first answer is a
// redirect, an http.Client whose transport is the rest of the pipeline
// follows it (which method and body each hop gets, which headers are
// copied, Referer, a Location that does not parse, a URL's userinfo as
// Basic auth), so that they follow net/http's fixes. Its CheckRedirect
// is the policy, strictest first:
//
//   - same-host (the baseline): a redirect is followed only to BASE_URL's
//     origin and under its path ("/v1/up" -> "/v1/down"); one that leaves
//     either ("/v1/up" -> "/admin/secret") is the caller's answer, not
//     followed: the caller's credentials are for the API under BASE_URL,
//     not for another API of the same host.
//   - any: every redirect is followed; from the first hop that leaves
//     BASE_URL's origin or path on, the credentials (credentialHeaders,
//     beyond the few net/http drops itself) and X-Time-Budget are
//     dropped, for the rest of the call.
//
// Each policy stops after MAX_REDIRECTS: the last 3xx is the answer.
// The http.Client costs its allocations (a redirect list, a copy of the
// first request's header) only on a call that is redirected.
type redirectStage struct {
	mode  string // same-host or any
	limit int    // redirects followed in one call at most
	base  *url.URL
	next  callStage
}

func (s *redirectStage) handle(cl *call) (*http.Response, error) {
	first := cl.req
	resp, err := s.next.handle(cl)
	if err != nil || !redirected(resp) {
		return resp, err
	}
	// The chain of hops keeps every request it saw: the first attempt's
	// is not given back.
	cl.lent = nil
	f := &follower{stage: s, cl: cl, answer: resp}
	hc := http.Client{Transport: f, CheckRedirect: f.check}
	if first.RequestURI != "" {
		// A server's request passed on: sent already, and http.Client
		// refuses one with RequestURI set.
		r := *first
		r.RequestURI = ""
		first = &r
	}
	resp, err = hc.Do(first)
	if err == nil {
		return resp, nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // net/http's wrapping: the pipeline's error, or its own
	}
	if e, ok := err.(*Error); ok {
		return nil, e
	}
	// net/http's own (a Location that does not parse, a body that cannot
	// be produced again).
	return nil, cl.fail(observe.OpTransport, 0, err)
}

// redirected reports whether resp may be a redirect to follow: a 301,
// 302, 303, 307 or 308.
func redirected(resp *http.Response) bool {
	switch resp.StatusCode {
	case 301, 302, 303, 307, 308:
		return true
	}
	return false
}

// follower is one redirected call's transport and policy for the
// http.Client that follows it. Its first round trip answers with the
// call's first response, already received; every later one is a hop,
// sent through the rest of the pipeline.
type follower struct {
	stage  *redirectStage
	cl     *call
	answer *http.Response // the first response, until the client asks for it
	left   bool           // a hop left BASE_URL's origin or path: credentials stay behind
}

func (f *follower) RoundTrip(req *http.Request) (*http.Response, error) {
	if resp := f.answer; resp != nil {
		f.answer = nil
		resp.Body = hopBody{resp.Body, resp.ContentLength}
		return resp, nil
	}
	f.cl.hop(req)
	resp, err := f.stage.next.handle(f.cl)
	if err != nil {
		return nil, err
	}
	if redirected(resp) && resp.Body != nil {
		resp.Body = hopBody{resp.Body, resp.ContentLength}
	}
	return resp, nil
}

// check is the policy (the http.Client's CheckRedirect): whether next,
// after the requests of via, is followed, and without the credentials
// once the chain left BASE_URL.
func (f *follower) check(next *http.Request, via []*http.Request) error {
	s := f.stage
	if len(via) > s.limit {
		return http.ErrUseLastResponse
	}
	under := underBase(next.URL, s.base)
	if s.mode == "same-host" && !under {
		return http.ErrUseLastResponse
	}
	if !under {
		f.left = true
	}
	if f.left {
		stripCredentials(next.Header)
	}
	return nil
}

// hopBody is the body of a redirect that may be followed: net/http reads
// at most 2 KiB of it before closing it, and a body closed unread loses
// its connection, so Close drains it within drain's bounds first.
type hopBody struct {
	io.ReadCloser
	length int64
}

func (b hopBody) Close() error { return drainClose(b.ReadCloser, b.length, nil) }

// hop makes req, a redirect of the call, its current request. Its
// attempts carry X-Time-Budget only when it goes to the system's own
// origin: the budget is never sent to another host.
func (cl *call) hop(req *http.Request) {
	_, deadline := cl.ctx.Deadline()
	cl.req = req
	cl.fresh, cl.redirected = false, true
	cl.budgeted = deadline && !cl.route.cfg.OmitTimeBudget && sameOrigin(req.URL, cl.c.base)
}
