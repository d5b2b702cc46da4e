package registry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/internal/ratelimit"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// This file holds a system's routes (<P>_ROUTES, config.Route): the
// policies of its operations. A call is matched to its route at the
// entry, before any stage; from then on every stage reads the route's
// policy. A system without routes runs on its own policy, which is a
// route too (Client.sys) and costs nothing more.

// route is the policy one call runs on: the system's, or one of its
// routes'. The stages that differ from route to route (budget, read
// timeout, retry, hedge, breaker, the route's own rate limit) read it;
// the others (bulkhead, the system's rate limit, transport) are the
// system's for every route: one upstream, one pool. A route is built
// once, with the client, and never changed.
type route struct {
	name       string         // "" for the system's own policy
	match      string         // the route's pattern
	cfg        config.Client  // the settings its calls run on
	idempotent bool           // its requests are replayable whatever their method
	cb         Circuit        // its breaker: its own, or the system's
	own        bool           // cb is its own
	rule       *breaker.Rule  // when its own breaker trips; nil without one
	rate       config.Rate    // its own limit (RATE_LIMIT); zero: none
	quota      Quota          // its own limit's quota; nil: none
	chain      callStage      // the call stages of its calls, built once
	lend       bool           // its first attempts' requests may be lent (internal/lentRequest)
	calls      *atomic.Uint64 // calls admitted on it, kept across changes of settings
}

// routeSet matches a request to one of a system's routes by ServeMux's
// rules: among the patterns that match the request's method and the
// absolute path it is sent with, the most specific wins. config checked
// the patterns with ServeMux itself (syntax, duplicates, conflicts), so
// that two patterns that match one request always have a most specific
// one. The matching is this file's own: ServeMux allocates on every
// request (about 9 allocations and 2us for a miss among three patterns),
// this costs none.
type routeSet struct {
	routes []*route
	pats   []pattern // by route
	base   []string  // BASE_URL's path segments, which a relative path is sent under
}

// segKind is the kind of a pattern segment, in order of specificity:
// where two matching patterns first differ, the higher kind wins.
type segKind uint8

const (
	segMulti segKind = iota + 1 // {name...}, or a trailing slash: the rest of the path
	segWild                     // {name}: one non-empty segment
	segLit                      // a literal segment
	segEnd                      // {$}: the end of a path that ends in a slash
)

type segment struct {
	kind segKind
	lit  string // segLit's text, unescaped
}

// pattern is a route's ServeMux pattern, split once.
type pattern struct {
	method string // "" for any
	segs   []segment
}

// parsePattern splits a pattern config has checked.
func parsePattern(p string) pattern {
	var out pattern
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		out.method, p = p[:i], strings.TrimLeft(p[i:], " \t")
	}
	rest := strings.TrimPrefix(p, "/")
	for {
		seg, more := rest, false
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seg, rest, more = rest[:i], rest[i+1:], true
		}
		switch {
		case seg == "" && !more:
			out.segs = append(out.segs, segment{kind: segMulti}) // a trailing slash
		case seg == "{$}":
			out.segs = append(out.segs, segment{kind: segEnd})
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "...}"):
			out.segs = append(out.segs, segment{kind: segMulti})
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}"):
			out.segs = append(out.segs, segment{kind: segWild})
		default:
			lit, err := url.PathUnescape(seg)
			if err != nil {
				lit = seg
			}
			out.segs = append(out.segs, segment{kind: segLit, lit: lit})
		}
		if !more || out.segs[len(out.segs)-1].kind == segMulti {
			return out
		}
	}
}

// pathSegs walks the segments of a path sent as pre's segments followed
// by rest ("charges/42"), without building it.
type pathSegs struct {
	pre     []string
	rest    string
	done    bool // rest has no segment left
	escaped bool // rest is escaped (the URL's RawPath)
}

func (s *pathSegs) next() (string, bool) {
	if len(s.pre) > 0 {
		seg := s.pre[0]
		s.pre = s.pre[1:]
		return seg, true
	}
	if s.done {
		return "", false
	}
	if i := strings.IndexByte(s.rest, '/'); i >= 0 {
		seg := s.rest[:i]
		s.rest = s.rest[i+1:]
		return seg, true
	}
	seg := s.rest
	s.rest, s.done = "", true
	return seg, true
}

// left reports whether a segment is left, an empty one included.
func (s *pathSegs) left() bool { return len(s.pre) > 0 || !s.done }

// matches reports whether p matches method and the path of s (a copy).
func (p *pattern) matches(method string, s pathSegs) bool {
	if p.method != "" && p.method != method && (p.method != http.MethodGet || method != http.MethodHead) {
		return false
	}
	for _, sg := range p.segs {
		switch sg.kind {
		case segMulti:
			return s.left()
		case segEnd:
			return len(s.pre) == 0 && !s.done && s.rest == ""
		}
		seg, ok := s.next()
		if !ok {
			return false
		}
		switch {
		case sg.kind == segWild && seg == "":
			return false
		case sg.kind == segLit && s.escaped && strings.IndexByte(seg, '%') >= 0:
			if u, err := url.PathUnescape(seg); err != nil || u != sg.lit {
				return false
			}
		case sg.kind == segLit && seg != sg.lit:
			return false
		}
	}
	return !s.left()
}

// moreSpecific reports whether p is more specific than q, two patterns
// that match one request: where their segments first differ in kind, the
// higher kind; with the same shape, the one with a method.
func (p *pattern) moreSpecific(q *pattern) bool {
	for i := range min(len(p.segs), len(q.segs)) {
		if a, b := p.segs[i].kind, q.segs[i].kind; a != b {
			return a > b
		}
	}
	if len(p.segs) != len(q.segs) {
		return len(p.segs) > len(q.segs)
	}
	return p.method != "" && q.method == ""
}

// match returns the route of req, or nil.
func (rs *routeSet) match(req *http.Request) *route {
	u := req.URL
	if u == nil {
		return nil
	}
	s := pathSegs{rest: u.Path}
	if u.RawPath != "" {
		s.rest, s.escaped = u.RawPath, true
	}
	s.rest = strings.TrimPrefix(s.rest, "/")
	if u.Host == "" {
		s.pre = rs.base // the entry joins a relative path to BASE_URL's
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	best := -1
	for i := range rs.pats {
		if rs.pats[i].matches(method, s) && (best < 0 || rs.pats[i].moreSpecific(&rs.pats[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	return rs.routes[best]
}

// policySet is one snapshot of a client's settings as its calls read
// them: the system's own policy, its routes, and its quota. It is built
// whole and never changed; a change of settings builds the next one
// (live.go), keeping what the change does not touch.
type policySet struct {
	l      config.Loaded       // the settings it was built from
	sys    *route              // the system's own policy
	routes *routeSet           // the system's routes; nil: none
	quota  Quota               // the system's RATE_LIMIT; nil: none
	pool   *pool               // the transport its calls are sent on
	vars   func() []config.Var // the redacted settings, computed on the first Status
}

// policies builds the policy set of l, the system's quota given. A route
// of prev (the set in force, nil at start) keeps its breaker, its limit
// and its counters in the next set when the settings they were built
// with did not change.
func (c *Client) policies(l config.Loaded, quota Quota, prev *policySet) (*policySet, error) {
	ps := &policySet{l: l, quota: quota, vars: sync.OnceValue(l.Vars), sys: &route{cfg: l.Client, cb: c.cb, calls: new(atomic.Uint64)}}
	if prev != nil && samePool(prev.pool, prev.l, l) {
		ps.pool = prev.pool
	} else {
		ps.pool = c.newPool(l)
	}
	if len(l.Routes) > 0 {
		rs := &routeSet{routes: make([]*route, len(l.Routes)), pats: make([]pattern, len(l.Routes))}
		if p := strings.Trim(c.base.Path, "/"); p != "" {
			rs.base = strings.Split(p, "/")
		}
		for i, lr := range l.Routes {
			r, err := c.newRoute(l, lr, prev.route(lr.Name))
			if err != nil {
				return nil, err
			}
			rs.routes[i], rs.pats[i] = r, parsePattern(lr.Match)
		}
		ps.routes = rs
	}
	ps.sys.chain = c.buildChain(ps.pool, ps.sys, quota)
	for _, r := range ps.routeList() {
		r.chain = c.buildChain(ps.pool, r, quota)
	}
	return ps, nil
}

// route returns the route named name of ps, or nil (ps nil included).
func (ps *policySet) route(name string) *route {
	for _, r := range ps.routeList() {
		if r.name == name {
			return r
		}
	}
	return nil
}

// routeList is ps's routes; nil without any.
func (ps *policySet) routeList() []*route {
	if ps == nil || ps.routes == nil {
		return nil
	}
	return ps.routes.routes
}

// newRoute builds route lr of system l: its settings, its own breaker
// (BREAKER=own; shared with the fleet at BREAKER_SCOPE=fleet) and its
// own limit: old's breaker when old had one with the same settings, and
// old's quota when old had one, at the new rate.
func (c *Client) newRoute(l config.Loaded, lr config.LoadedRoute, old *route) (*route, error) {
	r := &route{name: lr.Name, match: lr.Match, cfg: lr.Client, idempotent: lr.Idempotent, cb: c.cb,
		rate: lr.Rate(), calls: new(atomic.Uint64)}
	if old != nil {
		r.calls = old.calls
	}
	if lr.OwnBreaker {
		if old != nil && old.own {
			// The breaker stays: its window, open timeout and probes are
			// taken over by a breaker of the new ones at scope local (a
			// change of them at scope fleet needs a restart), its rule
			// is set when the policy is.
			r.cb, r.own, r.rule = old.cb, true, old.rule
			if lc, ok := r.cb.(*localCircuit); ok {
				r.rule.Set(lr.Client)
				lc.retune(lr.Client)
			}
		} else if err := c.ownBreaker(l, lr, r); err != nil {
			return nil, err
		}
	}
	if r.rate.Limited() {
		if old != nil && old.quota != nil {
			r.quota = old.quota
			if old.rate != r.rate {
				// The tokens carry over; a fleet's share follows on its
				// next sync (needsRestart: the quota has SetRate).
				r.quota.(rateSetter).SetRate(r.rate)
			}
		} else {
			local := ratelimit.NewLocal(r.rate)
			r.quota = local
			if l.Client.RateScope == "fleet" {
				fl := l
				fl.Name, fl.Client = l.Name+"."+lr.Name, lr.Client
				fl.Client.RateBurst = r.rate.Burst
				q, err := c.opts.fleetQuota(fl, local, nil)
				if err != nil {
					return nil, err
				}
				r.quota = q
			}
		}
	}
	return r, nil
}

// ownBreaker gives r a breaker of its own, shared with the fleet at
// BREAKER_SCOPE=fleet under a name no system can have (the system's and
// the route's, joined by a dot).
func (c *Client) ownBreaker(l config.Loaded, lr config.LoadedRoute, r *route) error {
	name := lr.Name
	report := func(from, to gobreaker.State) { c.routeBreakerChanged(name, from, to) }
	var toFleet func(from, to gobreaker.State) // set once, before any call
	r.rule = breaker.NewRule(lr.Client)
	own := newLocalCircuit(l.Name+"/"+lr.Name, lr.Client, r.rule, func(from, to gobreaker.State) {
		if toFleet != nil {
			toFleet(from, to)
			return
		}
		report(from, to)
	})
	r.cb, r.own = own, true
	if l.Client.BreakerScope != "fleet" {
		return nil
	}
	fl := l
	fl.Name, fl.Client = l.Name+"."+lr.Name, lr.Client
	cb, to, err := c.opts.fleetCircuit(fl, own, fleetReports{states: report})
	if err != nil {
		return err
	}
	toFleet, r.cb = to, cb
	return nil
}

// policy returns the route req runs on: the route whose pattern matches
// it, or the system's own policy.
func (c *Client) policy(req *http.Request) *route {
	ps := c.pol.Load()
	if ps.routes == nil {
		return ps.sys
	}
	if r := ps.routes.match(req); r != nil {
		return r
	}
	return ps.sys
}

// headerTimeout is the transport's READ_TIMEOUT for a system with routes:
// the longest of the system's and its routes', so that a route may wait
// longer than the system; a policy whose read timeout is shorter is cut
// by its read stage.
func headerTimeout(l config.Loaded) time.Duration {
	d := l.Client.ReadTimeout
	for _, r := range l.Routes {
		d = max(d, r.Client.ReadTimeout)
	}
	return d
}

// readStage ends an attempt that has no response headers within its
// route's READ_TIMEOUT, when that is shorter than the transport's (the
// longest of the system's routes'): the attempt's context ends with
// errHeaderTimeout, and the attempt is a read timeout, as the transport's
// own would be. It is in the chain only for such a policy.
type readStage struct {
	timeout time.Duration
	next    attemptStage
}

// errHeaderTimeout is the cause of an attempt the read stage ended. Its
// text is net/http's for the same timeout.
var errHeaderTimeout = errors.New("net/http: timeout awaiting response headers")

func (s *readStage) send(a *attempt) {
	parent := a.req.Context()
	ctx, cancel := context.WithCancelCause(parent)
	t := time.AfterFunc(s.timeout, func() { cancel(errHeaderTimeout) })
	a.req = a.req.WithContext(ctx)
	s.next.send(a)
	if t.Stop() || parent.Err() != nil || context.Cause(ctx) != errHeaderTimeout {
		if a.err != nil {
			cancel(nil)
		}
		return // a success's context lives as long as its call's
	}
	// The timer fired: no headers came in time, or they came as it fired
	// and the body would be cut.
	if a.resp != nil {
		_ = a.resp.Body.Close()
		a.resp = nil
	}
	a.op, a.err = observe.OpReadTimeout, errHeaderTimeout
}

// routeBreakerChanged tells the observers of a change of a route's own
// breaker, with the system's name and the route's.
func (c *Client) routeBreakerChanged(route string, from, to gobreaker.State) {
	for _, o := range c.observers {
		if ro, ok := o.(observe.RouteBreakerObserver); ok {
			ro.ObserveRouteBreaker(c.name, route, breaker.State(from), breaker.State(to))
		}
	}
}

// routeStatus is the status of each of the client's routes.
func (c *Client) routeStatus(ps *policySet) []observe.RouteStatus {
	routes := ps.routeList()
	if routes == nil {
		return nil
	}
	out := make([]observe.RouteStatus, len(routes))
	for i, r := range routes {
		out[i] = observe.RouteStatus{
			Name: r.name, Match: r.match, Calls: r.calls.Load(),
			ReadTimeout: r.cfg.ReadTimeout, CallTimeout: r.cfg.CallTimeout, Retries: r.cfg.Retries,
			Idempotent: r.idempotent, OwnBreaker: r.own,
		}
		if r.own {
			n := r.cb.Counts()
			out[i].Breaker = breaker.State(r.cb.State())
			out[i].BreakerCounts = observe.BreakerCounts{
				Requests: n.Requests, Successes: n.TotalSuccesses, Failures: n.TotalFailures,
				Exclusions: n.TotalExclusions, ConsecutiveSuccesses: n.ConsecutiveSuccesses,
				ConsecutiveFailures: n.ConsecutiveFailures,
			}
		}
		if r.quota != nil {
			rs := r.quota.Status()
			out[i].Rate = &rs
		}
	}
	return out
}

// template is the path of the route's pattern, less its method: the
// bounded url.template of its calls ("/v1/charges/{id}").
func (r *route) template() string {
	if i := strings.IndexByte(r.match, ' '); i >= 0 {
		return strings.TrimSpace(r.match[i+1:])
	}
	return r.match
}

// replayable reports whether req may be sent more than once: a safe
// method or an Idempotency-Key (or any method on a route declared
// IDEMPOTENT), and a body GetBody can produce again.
func replayable(req *http.Request, idempotent bool) bool {
	if !idempotent {
		return policy.Replayable(req)
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// withHeaderTimeout is l's settings for its transport: READ_TIMEOUT the
// longest of the system's and its routes' (headerTimeout).
func withHeaderTimeout(l config.Loaded) config.Client {
	c := l.Client
	c.ReadTimeout = headerTimeout(l)
	return c
}
