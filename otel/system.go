package otel

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/outbound-go/outbound/observe"
)

// system holds the attribute sets of one system, resolved once, so that
// recording an event allocates nothing once its set is known.
type system struct {
	name    string
	attr    attribute.KeyValue           // outbound.system
	base    attrSet                      // outbound.system alone
	outcome [observe.NumOutcomes]attrSet // outbound.system and outbound.outcome
	breaker [len(breakerStates)]attrSet  // outbound.system and outbound.breaker.state
	port    atomic.Int32                 // the default port of the system's scheme, learned from its attempts; 0: none yet

	// requests and active map what an attempt's attributes depend on
	// to their resolved set. Both are copied on write under mu: their
	// keys are bounded (methods, hosts, statuses, ops, routes), so
	// writes stop soon after start.
	requests atomic.Pointer[map[requestKey]attrSet]
	active   atomic.Pointer[map[activeKey]attrSet]
	mu       sync.Mutex
}

// maxSets bounds each map of resolved sets: past it, a new set is built
// for each record rather than kept (a pathological spread of hosts or
// routes costs allocations, never memory).
const maxSets = 1024

func newSystem(name string) *system {
	s := &system{name: name, attr: SystemKey.String(name)}
	s.base = newAttrSet(s.attr)
	for o := range observe.NumOutcomes {
		s.outcome[o] = newAttrSet(s.attr, OutcomeKey.String(observe.Outcome(o).String()))
	}
	for k, state := range breakerStates {
		s.breaker[k] = newAttrSet(s.attr, BreakerStateKey.String(string(state)))
	}
	s.requests.Store(&map[requestKey]attrSet{})
	s.active.Store(&map[activeKey]attrSet{})
	return s
}

// requestKey is what the attributes of an attempt's
// http.client.request.duration record depend on.
type requestKey struct {
	method, host, route string
	status              int
	op                  observe.Op
}

// requestAttrs returns the attributes of e's record of
// http.client.request.duration: http.request.method, server.address,
// server.port, http.response.status_code when there was a response,
// error.type (the status for a status of 400 or more, else the op that
// ended the attempt), url.template when the caller gave a route, and
// outbound.system. The raw path is never one of them.
func (s *system) requestAttrs(e *observe.AttemptEvent) attrSet {
	k := requestKey{method: e.Method, host: e.Host, route: e.Route, status: e.Status, op: e.Op}
	return cached(&s.requests, &s.mu, k, func() attrSet {
		method, _ := knownMethod(k.method)
		host, port := s.splitHost(k.host)
		kvs := make([]attribute.KeyValue, 0, 7)
		kvs = append(kvs, s.attr, semconv.HTTPRequestMethodKey.String(method), semconv.ServerAddress(host))
		if port > 0 {
			kvs = append(kvs, semconv.ServerPort(port))
		}
		if k.status > 0 {
			kvs = append(kvs, semconv.HTTPResponseStatusCode(k.status))
		}
		if et := errorType(k.status, k.op); et != "" {
			kvs = append(kvs, semconv.ErrorTypeKey.String(et))
		}
		if k.route != "" {
			kvs = append(kvs, semconv.URLTemplate(k.route))
		}
		return newAttrSet(kvs...)
	})
}

// activeKey is what the attributes of http.client.active_requests
// depend on.
type activeKey struct {
	method, host string
	port         int
}

// activeAttrs returns the attributes of http.client.active_requests:
// http.request.method, server.address, server.port and outbound.system.
func (s *system) activeAttrs(method, host string, port int) attrSet {
	return cached(&s.active, &s.mu, activeKey{method, host, port}, func() attrSet {
		return newAttrSet(s.attr, semconv.HTTPRequestMethodKey.String(method), semconv.ServerAddress(host), semconv.ServerPort(port))
	})
}

// cached returns the set of k in *m, building it with build and keeping
// it on a miss (up to maxSets).
func cached[K comparable](m *atomic.Pointer[map[K]attrSet], mu *sync.Mutex, k K, build func() attrSet) attrSet {
	if set, ok := (*m.Load())[k]; ok {
		return set
	}
	mu.Lock()
	defer mu.Unlock()
	cur := *m.Load()
	if set, ok := cur[k]; ok {
		return set
	}
	set := build()
	if len(cur) >= maxSets {
		return set
	}
	next := make(map[K]attrSet, len(cur)+1)
	for key, v := range cur {
		next[key] = v
	}
	next[k] = set
	m.Store(&next)
	return set
}

// errorType is error.type for an attempt or a call: the status code for
// a status of 400 or more (as the semantic conventions say for a client),
// else the name of the op that ended it without a response ("connect
// timeout"); "" for a success.
func errorType(status int, op observe.Op) string {
	switch {
	case status >= 400:
		return strconv.Itoa(status)
	case status > 0:
		return ""
	case op != 0 && op.String() != "":
		return op.String()
	}
	return ""
}

// urlHostPort returns server.address and server.port of a request's URL:
// its port, or its scheme's default, which the system learns for the
// events whose host has no port.
func (s *system) urlHostPort(u *url.URL) (string, int) {
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return u.Hostname(), n
	}
	port := int32(0)
	switch u.Scheme {
	case "https":
		port = 443
	case "http":
		port = 80
	}
	if port != 0 && s.port.Load() != port {
		s.port.Store(port)
	}
	return u.Hostname(), int(port)
}

// splitHost splits an event's host[:port] into server.address and
// server.port; a host without a port has the system's default (0 when no
// attempt taught it yet).
func (s *system) splitHost(hostport string) (string, int) {
	if i := strings.LastIndexByte(hostport, ':'); i > strings.LastIndexByte(hostport, ']') {
		if host, p, err := net.SplitHostPort(hostport); err == nil {
			n, _ := strconv.Atoi(p)
			return host, n
		}
	}
	return strings.Trim(hostport, "[]"), int(s.port.Load())
}

// knownMethod returns http.request.method: the method when it is one of
// RFC 9110's or PATCH, else "_OTHER" (and ok false), as the semantic
// conventions ask so that the attribute stays bounded.
func knownMethod(m string) (_ string, ok bool) {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return m, true
	case "":
		return "GET", true // net/http's meaning of an empty method
	}
	return "_OTHER", false
}
