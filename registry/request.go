// Requests: the call's copy of the caller's request for its first hop,
// and each attempt's copy with X-Time-Budget set to what is left of the
// call. The caller's request is never written. The entry and the retry
// stage are its users.

package registry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"

	"github.com/outbound-go/outbound/capbudget"
)

// requestTarget is where a call's requests go: BASE_URL, which a relative URL
// joins, and whether the system receives no X-Time-Budget
// (OMIT_TIME_BUDGET).
type requestTarget struct {
	Base       *url.URL
	OmitBudget bool
}

// firstRequest fills own with the call's copy of req for its first hop, under
// ctx (the call's capped context), after the checks http.Client makes
// before its RoundTripper (a URL, no RequestURI): a relative URL joined
// to to.Base, and a URL's userinfo (to.Base's, for a relative one) as Basic
// auth. With to.OmitBudget the copy carries no X-Time-Budget, not even one
// the caller set. Its header map is the caller's unless it had to change;
// the attempts' X-Time-Budget goes on copies of their own ([attemptRequest]).
// own is the caller's storage (the call's, which lives in its response
// body), so that the copy costs no allocation of its own.
func firstRequest(ctx context.Context, req *http.Request, to requestTarget, own *http.Request) error {
	base, omitBudget := to.Base, to.OmitBudget
	switch {
	case req.URL == nil:
		return errors.New("http: nil Request.URL")
	case req.RequestURI != "":
		return errors.New("http: Request.RequestURI can't be set in client requests")
	}
	// WithContext inlines: its copy stays on the stack.
	*own = *req.WithContext(ctx)
	user := own.URL.User
	if own.URL.Host == "" {
		own.URL = resolveRef(base, own.URL)
		user = base.User
	}
	if (user != nil && own.Header.Get("Authorization") == "") || own.Header == nil ||
		(omitBudget && own.Header.Get(capbudget.Header) != "") {
		// The header map is the caller's: change a copy.
		own.Header = own.Header.Clone()
		if own.Header == nil {
			own.Header = make(http.Header)
		}
		setBasicAuth(own.Header, user)
		// The system never receives the header unless it is ours, not
		// even one the caller set (a third party has no use for our
		// budget).
		if omitBudget {
			own.Header.Del(capbudget.Header)
		}
	}
	return nil
}

// lentRequest is the request of a call's first attempt when it carries
// X-Time-Budget: a copy of the call's request with a header map of its
// own, lent by a [requestPool] so that the map is not made anew for every call.
//
// It goes back to its pool ([lentRequest.Return]) only once no one can read it:
// net/http's RoundTripper contract lets the caller of RoundTrip reuse a
// request once the response's body has been closed, and before that a
// transport may read it from another goroutine. So the registry returns it
// when the caller has closed the body of the call's answer, and only when
// the request went to no one but the system's own transport (no tracer,
// no wrapper, no hedge), every attempt sent with it got a response, and
// the call's answer does not point at it (its Request is the call's own).
// Any other end leaves it to the garbage collector.
type lentRequest struct {
	Req    http.Request
	header http.Header // Req's, kept across loans
	budget [1]string   // X-Time-Budget's value slice
	pool   *requestPool
}

// requestPool lends the requests of first attempts ([lentRequest]). Its zero value is
// ready for use; it is safe for concurrent use.
type requestPool struct{ p sync.Pool }

// attemptRequest returns the request of the first attempt of a call whose
// request is own, with X-Time-Budget set to what is left of ctx: a copy of
// own under ctx with a header map of its own (own's values shared). With a
// pool, the copy is lent by it ([lentRequest]); with none, it is made anew: the
// copy and the value slice of the header in one allocation, the map in
// two more. The value's string is one more either way.
func attemptRequest(ctx context.Context, own *http.Request, pool *requestPool) (*http.Request, *lentRequest) {
	var l *lentRequest
	if pool != nil {
		l, _ = pool.p.Get().(*lentRequest)
	}
	if l == nil {
		l = &lentRequest{pool: pool}
	}
	l.Req = *own
	l.Req.Header = l.header
	if l.header == nil {
		l.Req.Header = make(http.Header, len(own.Header)+1)
	}
	for k, v := range own.Header {
		l.Req.Header[k] = v
	}
	setBudget(ctx, l.Req.Header, &l.budget)
	if pool == nil {
		return &l.Req, nil
	}
	l.header = l.Req.Header
	return &l.Req, l
}

// Return gives l back to its pool: no one reads l.Req any more.
func (l *lentRequest) Return() {
	clear(l.header)
	l.budget[0] = ""
	l.Req = http.Request{}
	l.pool.p.Put(l)
}

// withBudget copies req under ctx with a copy of its header map (values
// shared), so that the attempt's headers can be set without touching the
// call's request, and sets X-Time-Budget in it to what is left of ctx:
// the request of an attempt other than the first (a retry, a redirect's
// hop). The copy and the header's value slice are one allocation, the map
// and the value's string two more.
func withBudget(ctx context.Context, req *http.Request) *http.Request {
	r, _ := attemptRequest(ctx, req.WithContext(ctx), nil)
	return r
}

// setBudget sets X-Time-Budget in h to what is left of ctx, in the value
// slice v.
//
// The value was once a string over the request's own bytes
// (unsafe.String), one allocation less; it is strconv's again: on the
// registry's BenchmarkCall (-count 5, 20000 calls) unsafe saved exactly
// 1 allocation per call (86 -> 85 at 1 and 16 in flight, 87 -> 86 at 64;
// raw net/http 85/85/86) and no throughput beyond the noise, short of
// what a rewrite of the standard library must earn (3 % or 2
// allocations).
func setBudget(ctx context.Context, h http.Header, v *[1]string) {
	var digits [20]byte
	b, _ := capbudget.AppendHeaderValue(ctx, digits[:0])
	v[0] = string(b)
	h[capbudget.Header] = v[:]
}

// copyRequest copies req for another attempt sent beside it (a hedge): its own
// header, X-Time-Budget set to what is left now when req carries one, and
// its body replayed through GetBody. ok is false when the body cannot be
// produced again.
func copyRequest(req *http.Request) (_ *http.Request, ok bool) {
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
