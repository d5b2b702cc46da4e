package otel

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbound-go/outbound/observe"
)

// system holds the attribute sets of one system, resolved once, so that
// recording an event or starting a span allocates nothing on our side
// once its set is known.
type system struct {
	name    string
	attr    attribute.KeyValue           // outbound.system
	base    attrSet                      // outbound.system alone
	outcome [observe.NumOutcomes]attrSet // outbound.system and outbound.outcome
	breaker [len(breakerStates)]attrSet  // outbound.system and outbound.breaker.state
	port    atomic.Int32                 // the default port of the system's scheme, learned from its attempts; 0: none yet

	// requests, attempts and calls map what a record's or a span's
	// attributes depend on to their resolved set. They are copied on
	// write under mu: their keys are bounded (methods, hosts, statuses,
	// ops, routes), so writes stop soon after start.
	requests atomic.Pointer[map[requestKey]attrSet]
	attempts atomic.Pointer[map[attemptKey]*attemptSets]
	calls    atomic.Pointer[map[string][]trace.SpanStartOption]
	mu       sync.Mutex
}

// attrSet is a resolved set of attributes, as the option of each kind of
// instrument, each in a slice of its own: passing one allocates nothing.
type attrSet struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newAttrSet(kvs ...attribute.KeyValue) attrSet {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return attrSet{[]metric.AddOption{o}, []metric.RecordOption{o}, []metric.ObserveOption{o}}
}

// attemptSets are what an attempt's span and its count in flight start
// with.
type attemptSets struct {
	inFlight attrSet                 // http.client.active_requests
	start    []trace.SpanStartOption // the span's kind and attributes
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
	s.attempts.Store(&map[attemptKey]*attemptSets{})
	s.calls.Store(&map[string][]trace.SpanStartOption{})
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

// attemptKey is what the attributes an attempt's span starts with, and
// those of http.client.active_requests, depend on.
type attemptKey struct {
	method, host string
	port         int
}

// attemptStart returns the sets an attempt starts with: for
// http.client.active_requests and at the start of its span,
// http.request.method, server.address, server.port and outbound.system.
func (s *system) attemptStart(method, host string, port int) *attemptSets {
	return cached(&s.attempts, &s.mu, attemptKey{method, host, port}, func() *attemptSets {
		kvs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method), semconv.ServerAddress(host), semconv.ServerPort(port), s.attr}
		return &attemptSets{
			inFlight: newAttrSet(kvs...),
			start:    []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(kvs...)},
		}
	})
}

// callStart returns what a call's span starts with: its kind,
// http.request.method and outbound.system.
func (s *system) callStart(method string) []trace.SpanStartOption {
	return cached(&s.calls, &s.mu, method, func() []trace.SpanStartOption {
		return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method), s.attr)}
	})
}

// cached returns the value of k in *m, building it with build and
// keeping it on a miss (up to maxSets).
func cached[K comparable, V any](m *atomic.Pointer[map[K]V], mu *sync.Mutex, k K, build func() V) V {
	if v, ok := (*m.Load())[k]; ok {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	cur := *m.Load()
	if v, ok := cur[k]; ok {
		return v
	}
	v := build()
	if len(cur) >= maxSets {
		return v
	}
	next := make(map[K]V, len(cur)+1)
	for key, old := range cur {
		next[key] = old
	}
	next[k] = v
	m.Store(&next)
	return v
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
