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
	origin  atomic.Pointer[origin]       // BASE_URL's server; nil until known
	routes  atomic.Pointer[routeTable]   // the declared routes, for the spans; nil: none

	// requests, attempts, calls and routed map what a record's or a
	// span's attributes depend on to their resolved set. They are
	// copied on write under mu: their keys are bounded (methods, the
	// origin or not, statuses, ops, routes), so writes stop soon after
	// start; attempts is keyed by the host a span names, which a
	// redirect hop chooses, and stops growing at maxSets.
	requests atomic.Pointer[map[requestKey]attrSet]
	attempts atomic.Pointer[map[attemptKey]*attemptSets]
	calls    atomic.Pointer[map[string][]trace.SpanStartOption]
	routed   atomic.Pointer[map[routedKey]attrSet]
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
	s.routed.Store(&map[routedKey]attrSet{})
	return s
}

// server is server.address and server.port; port 0: none.
type server struct {
	address string
	port    int
}

// otherServer is the server of the metrics of a request to another
// origin than BASE_URL's (a redirect hop elsewhere): one value whatever
// the upstream named, so that no upstream sets the cardinality.
var otherServer = server{address: "_OTHER"}

// origin is BASE_URL's server, and how request URLs carry it.
type origin struct {
	host        string   // as request URLs carry it: "pay.example", "127.0.0.1:8080"
	server      server   // its port given, or its scheme's default
	defaultPort int      // the port of a host without one: the scheme's default; 0 unknown
	base        *url.URL // BASE_URL as Status shows it; nil when learned from a request
}

func newOrigin(scheme, host string, base *url.URL) *origin {
	o := &origin{host: host, defaultPort: schemePort(scheme), base: base}
	o.server.address, o.server.port = splitHost(host, o.defaultPort)
	return o
}

// serves reports whether host (host[:port]) is the origin's server.
func (o *origin) serves(host string) bool {
	if host == o.host {
		return true
	}
	address, port := splitHost(host, o.defaultPort)
	return port == o.server.port && strings.EqualFold(address, o.server.address)
}

// metricServer returns server.address and server.port of the metrics of
// a request to host: BASE_URL's for its origin, otherServer for any
// other. A system whose BASE_URL was not read (its registry's Status not
// handed over) takes the first host it sees as its origin: a call's
// first hop always goes to BASE_URL's origin (the registry refuses any
// other), so the first request any call reports went there.
func (s *system) metricServer(scheme, host string) server {
	o := s.origin.Load()
	if o == nil {
		s.origin.CompareAndSwap(nil, newOrigin(scheme, host, nil))
		o = s.origin.Load()
	}
	if o.serves(host) {
		return o.server
	}
	return otherServer
}

// requestKey is what the attributes of an attempt's
// http.client.request.duration record depend on.
type requestKey struct {
	method, route, routeName string
	server                   server
	status                   int // boundedStatus's
	op                       observe.Op
}

// requestAttrs returns the attributes of e's record of
// http.client.request.duration: http.request.method, server.address and
// server.port (BASE_URL's, or "_OTHER" for another origin),
// http.response.status_code when there was a response (in 100-599),
// error.type (the status for a status of 400 or more, "_OTHER" for a
// status out of that range, else the op that ended the attempt),
// url.template when the call had one, outbound.route on a declared
// route, and outbound.system. The raw path is never one of them, nor
// anything an upstream chose.
func (s *system) requestAttrs(e *observe.AttemptEvent) attrSet {
	method, _ := knownMethod(e.Method)
	k := requestKey{method: method, route: e.Route, routeName: e.RouteName, server: s.metricServer("", e.Host),
		status: boundedStatus(e.Status), op: e.Op}
	return cached(&s.requests, &s.mu, k, func() attrSet {
		kvs := make([]attribute.KeyValue, 0, 8)
		kvs = append(kvs, s.attr, semconv.HTTPRequestMethodKey.String(k.method))
		kvs = appendServer(kvs, k.server)
		if k.status > 0 {
			kvs = append(kvs, semconv.HTTPResponseStatusCode(k.status))
		}
		if et := errorType(k.status, k.op); et != "" {
			kvs = append(kvs, semconv.ErrorTypeKey.String(et))
		}
		if k.route != "" {
			kvs = append(kvs, semconv.URLTemplate(k.route))
		}
		if k.routeName != "" {
			kvs = append(kvs, RouteKey.String(k.routeName))
		}
		return newAttrSet(kvs...)
	})
}

func appendServer(kvs []attribute.KeyValue, srv server) []attribute.KeyValue {
	kvs = append(kvs, semconv.ServerAddress(srv.address))
	if srv.port > 0 {
		kvs = append(kvs, semconv.ServerPort(srv.port))
	}
	return kvs
}

// otherStatus stands for every status outside 100-599 in the metrics:
// no such status is registered, and an upstream that makes them up must
// not add series.
const otherStatus = -1

// boundedStatus is a status as the metrics record it: itself in
// 100-599, 0 for none, otherStatus for any other.
func boundedStatus(status int) int {
	switch {
	case status == 0 || (status >= 100 && status <= 599):
		return status
	}
	return otherStatus
}

// routedKey is what the attributes of a call's records on a declared
// route depend on.
type routedKey struct {
	route   string
	outcome observe.Outcome
}

// callSet returns the attributes of a call's records (outbound.calls,
// outbound.call.duration): outbound.system and outbound.outcome, and
// outbound.route on a declared route.
func (s *system) callSet(route string, out observe.Outcome) attrSet {
	if route == "" {
		return s.outcome[out]
	}
	return cached(&s.routed, &s.mu, routedKey{route, out}, func() attrSet {
		return newAttrSet(s.attr, OutcomeKey.String(out.String()), RouteKey.String(route))
	})
}

// attemptKey is what the attributes an attempt's span starts with, and
// those of http.client.active_requests, depend on.
type attemptKey struct {
	method, scheme, host string
}

// attemptStart returns the sets an attempt to scheme://host starts
// with: for http.client.active_requests, http.request.method,
// server.address and server.port (as metricServer bounds them) and
// outbound.system; at the start of its span, the same with the server
// the request goes to.
func (s *system) attemptStart(method, scheme, host string) *attemptSets {
	return cached(&s.attempts, &s.mu, attemptKey{method, scheme, host}, func() *attemptSets {
		address, port := splitHost(host, schemePort(scheme))
		span := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method), semconv.ServerAddress(address), semconv.ServerPort(port), s.attr}
		metric := appendServer([]attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method), s.attr}, s.metricServer(scheme, host))
		return &attemptSets{
			inFlight: newAttrSet(metric...),
			start:    []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(span...)},
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
// "_OTHER" for otherStatus, else the name of the op that ended it
// without a response ("connect timeout"); "" for a success.
func errorType(status int, op observe.Op) string {
	switch {
	case status == otherStatus:
		return semconv.ErrorTypeOther.Value.AsString()
	case status >= 400:
		return strconv.Itoa(status)
	case status > 0:
		return ""
	case op != 0 && op.String() != "":
		return op.String()
	}
	return ""
}

// schemePort is the default port of an http or https URL; 0 for another
// scheme or none.
func schemePort(scheme string) int {
	switch scheme {
	case "https":
		return 443
	case "http":
		return 80
	}
	return 0
}

// splitHost splits a URL's host[:port] into server.address and
// server.port; a host without a port has defaultPort.
func splitHost(hostport string, defaultPort int) (string, int) {
	if i := strings.LastIndexByte(hostport, ':'); i > strings.LastIndexByte(hostport, ']') {
		if host, p, err := net.SplitHostPort(hostport); err == nil {
			n, _ := strconv.Atoi(p)
			return host, n
		}
	}
	return strings.Trim(hostport, "[]"), defaultPort
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
