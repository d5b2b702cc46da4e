// Package request makes the requests of a call: the copy of the
// caller's request for its first hop, and each attempt's copy with
// X-Time-Budget set to what is left of the call. The caller's request is
// never written. It is internal: the registry's entry and its retry stage
// are its users.
package request

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/origin"
)

// First returns the call's copy of req for its first hop, under ctx (the
// call's capped context), after the checks http.Client makes before its
// RoundTripper (a URL, no RequestURI): a relative URL joined to base, a
// URL's userinfo (base's, for a relative one) as Basic auth, and
// X-Time-Budget set to what is left of ctx when the system receives one
// (not omitBudget) and ctx has a deadline; otherwise without the header,
// not even one the caller set. budgeted says whether it carries the
// header, in a header map of the copy's own. One copy serves the call and
// its first attempt.
func First(ctx context.Context, req *http.Request, base *url.URL, omitBudget bool) (_ *http.Request, budgeted bool, _ error) {
	switch {
	case req.URL == nil:
		return nil, false, errors.New("http: nil Request.URL")
	case req.RequestURI != "":
		return nil, false, errors.New("http: Request.RequestURI can't be set in client requests")
	}
	var r2 *http.Request
	_, deadline := ctx.Deadline() // a stream's has none unless the caller's has
	if budgeted = deadline && !omitBudget; budgeted {
		r2 = WithBudget(ctx, req)
	} else {
		r2 = req.WithContext(ctx)
	}
	user := r2.URL.User
	if r2.URL.Host == "" {
		r2.URL = origin.Resolve(base, r2.URL)
		user = base.User
	}
	if (user != nil && r2.Header.Get("Authorization") == "") || r2.Header == nil ||
		(omitBudget && r2.Header.Get(capbudget.Header) != "") {
		if !budgeted { // the header map is still the caller's
			r2.Header = r2.Header.Clone()
			if r2.Header == nil {
				r2.Header = make(http.Header)
			}
		}
		origin.BasicAuth(r2.Header, user)
		// The system never receives the header unless it is ours, not
		// even one the caller set (a third party has no use for our
		// budget).
		if omitBudget {
			r2.Header.Del(capbudget.Header)
		}
	}
	return r2, budgeted, nil
}

// budgeted is an attempt's shallow copy of the call's request, allocated
// together with its X-Time-Budget value slice.
type budgeted struct {
	req    http.Request
	budget [1]string
}

// WithBudget copies req under ctx with a copy of its header map (values
// shared), so that the attempt's headers can be set without touching the
// caller's request, and sets X-Time-Budget in it to what is left of ctx.
// The copy and the header's value slice are one allocation, the map and
// the value's string two more.
//
// The value was once a string over the copy's own bytes
// (unsafe.String), one allocation less; it is strconv's again: on the
// registry's BenchmarkCall (-count 5, 20000 calls) unsafe saved exactly
// 1 allocation per call (86 -> 85 at 1 and 16 in flight, 87 -> 86 at 64;
// raw net/http 85/85/86) and no throughput beyond the noise, short of
// what a rewrite of the standard library must earn (3 % or 2
// allocations).
func WithBudget(ctx context.Context, req *http.Request) *http.Request {
	// WithContext inlines: its copy stays on the stack.
	a := &budgeted{req: *req.WithContext(ctx)}
	h := make(http.Header, len(req.Header)+1)
	for k, v := range req.Header {
		h[k] = v
	}
	var digits [20]byte
	v, _ := capbudget.AppendHeaderValue(ctx, digits[:0])
	a.budget[0] = string(v)
	h[capbudget.Header] = a.budget[:]
	a.req.Header = h
	return &a.req
}

// Copy copies req for another attempt sent beside it (a hedge): its own
// header, X-Time-Budget set to what is left now when req carries one, and
// its body replayed through GetBody. ok is false when the body cannot be
// produced again.
func Copy(req *http.Request) (_ *http.Request, ok bool) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		b, err := req.GetBody()
		if err != nil {
			return nil, false
		}
		r.Body = b
	}
	if r.Header.Get(capbudget.Header) != "" {
		capbudget.SetHeader(req.Context(), r.Header)
	}
	return r, true
}
