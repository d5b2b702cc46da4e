package otel

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// RefusalEvent is the name of the span event a call refused before
// anything was sent (breaker open, bulkhead full, budget spent, ...)
// adds to its call span, with outbound.refusal.reason and
// outbound.outcome.
const RefusalEvent = "outbound.refusal"

// callKey keys a call's state in the context its attempts inherit.
type callKey struct{}

// call is the state of one traced call, shared by its attempts (hedges
// run concurrently: the count is atomic).
type call struct {
	span     trace.Span
	route    *routeInfo   // the declared route it runs on; nil: none
	template string       // url.template: the caller's (observe.WithRoute), else its route's; "": none
	sent     atomic.Int32 // attempts sent so far
}

// TraceCall implements [observe.Tracer]: each call of system runs under
// a span of its own (kind internal: the semantic conventions give each
// request sent, not the call around them, the HTTP client span), named
// by its method. The attempts' spans are its children.
func (i *Instrumentation) TraceCall(system string, next http.RoundTripper) http.RoundTripper {
	return &callTracer{i: i, s: i.system(system), next: next}
}

// TraceAttempt implements [observe.Tracer]: each attempt of system (the
// first, a retry, a hedge, a redirect hop) is a client span, child of
// its call's, whose context the propagators write into a copy of the
// attempt's headers.
func (i *Instrumentation) TraceAttempt(system string, next http.RoundTripper) http.RoundTripper {
	return &attemptTracer{i: i, s: i.system(system), next: next}
}

type callTracer struct {
	i    *Instrumentation
	s    *system
	next http.RoundTripper
}

// RoundTrip runs the call under its span and returns what the pipeline
// returned, unchanged. A span that records nothing (no SDK, or not
// sampled) costs the call nothing more: its attempts start from the
// caller's context. A recording span is matched to the declared routes
// (route.go), and its attempts inherit its route, redirect hops
// included, as the registry runs a call on one route.
func (t *callTracer) RoundTrip(req *http.Request) (*http.Response, error) {
	method, _ := knownMethod(req.Method)
	template := observe.Route(req.Context())
	ctx, span := t.i.tracer.Start(req.Context(), spanName(method, template), t.s.callStart(method)...)
	if !span.IsRecording() {
		span.End()
		return t.next.RoundTrip(req)
	}
	c := &call{span: span, template: template}
	if c.route = t.s.routes.Load().match(req); c.route != nil {
		span.SetAttributes(RouteKey.String(c.route.name))
		if c.template == "" {
			c.template = c.route.template
			span.SetName(spanName(method, c.template))
		}
	}
	if c.template != "" {
		span.SetAttributes(semconv.URLTemplate(c.template))
	}
	resp, err := t.next.RoundTrip(req.WithContext(context.WithValue(ctx, callKey{}, c)))
	endCall(c, resp, err)
	return resp, err
}

// endCall ends a call's span with the status the caller got, or the
// registry's error: its op as error.type, and a refusal as an event.
func endCall(c *call, resp *http.Response, err error) {
	span := c.span
	attempts := AttemptsKey.Int(int(c.sent.Load()))
	var re *registry.Error
	switch {
	case errors.As(err, &re):
		span.SetAttributes(attempts, semconv.ErrorTypeKey.String(errorTypeOr(errorType(0, re.Op))))
		if out := re.Op.Outcome(false); out.Refused() {
			span.AddEvent(RefusalEvent, trace.WithAttributes(
				RefusalReasonKey.String(re.Op.Reason()), OutcomeKey.String(out.String())))
		}
		span.SetStatus(codes.Error, err.Error())
	case err != nil:
		span.SetAttributes(attempts, semconv.ErrorType(err))
		span.SetStatus(codes.Error, err.Error())
	default:
		endWithStatus(span, resp, attempts)
	}
	span.End()
}

// endWithStatus sets a response's status and more on span and, for a
// status of 400 or more, error.type and the error status (a client's
// span, as the semantic conventions say).
func endWithStatus(span trace.Span, resp *http.Response, more attribute.KeyValue) {
	status := semconv.HTTPResponseStatusCode(resp.StatusCode)
	if resp.StatusCode < 400 {
		span.SetAttributes(status, more)
		return
	}
	span.SetAttributes(status, more, semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
	span.SetStatus(codes.Error, "")
}

func errorTypeOr(et string) string {
	if et == "" {
		return semconv.ErrorTypeOther.Value.AsString()
	}
	return et
}

// spanName is a span's name as the semantic conventions give it: the
// method, or "HTTP" for a method they do not know, followed by the route
// when the caller gave one (observe.WithRoute).
func spanName(method, route string) string {
	if method == "_OTHER" {
		method = "HTTP"
	}
	if route != "" {
		return method + " " + route
	}
	return method
}

type attemptTracer struct {
	i    *Instrumentation
	s    *system
	next http.RoundTripper
}

// RoundTrip sends one attempt under its span, with the span's context in
// a copy of the request's headers, and counts it in flight.
func (t *attemptTracer) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	method, known := knownMethod(req.Method)
	sets := t.s.attemptStart(method, req.URL.Scheme, req.URL.Host)
	template := observe.Route(ctx)
	ctx, span := t.i.tracer.Start(ctx, spanName(method, template), sets.start...)
	out := req
	if span.IsRecording() {
		t.recordStart(span, req, method, known, template)
		out = req.WithContext(ctx)
	}
	if span.SpanContext().IsValid() {
		// The caller's header map is never written: the first field
		// the propagators set goes into a copy.
		h := &headerCopy{src: req.Header}
		t.i.prop.Inject(ctx, h)
		if h.dst != nil {
			if out == req {
				out = req.WithContext(ctx)
			}
			out.Header = h.dst
		}
	}
	active := t.i.m.active.Inst()
	counted := active.Enabled(ctx)
	if counted {
		active.Add(ctx, 1, sets.inFlight.add...)
	}
	resp, err := t.next.RoundTrip(out)
	if counted {
		active.Add(ctx, -1, sets.inFlight.add...)
	}
	endAttempt(span, resp, err)
	return resp, err
}

// recordStart sets the attributes of a recording attempt span that its
// start did not have (and its name, on a declared route the caller gave
// no template for), and those of its call's span that its first attempt
// gives.
func (t *attemptTracer) recordStart(span trace.Span, req *http.Request, method string, known bool, template string) {
	var kvs [4]attribute.KeyValue
	attrs := append(kvs[:0], semconv.URLFull(fullURL(req.URL)))
	if !known {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(req.Method))
	}
	c, _ := req.Context().Value(callKey{}).(*call)
	var route *routeInfo
	if c != nil {
		route = c.route
	} else {
		route = t.s.routes.Load().match(req)
	}
	if route != nil {
		attrs = append(attrs, RouteKey.String(route.name))
		if template == "" {
			template = route.template
			span.SetName(spanName(method, template))
		}
	}
	if template != "" {
		attrs = append(attrs, semconv.URLTemplate(template))
	}
	if c != nil {
		if resend := int(c.sent.Add(1)) - 1; resend > 0 {
			attrs = append(attrs, semconv.HTTPRequestResendCount(resend))
		} else {
			address, port := splitHost(req.URL.Host, schemePort(req.URL.Scheme))
			c.span.SetAttributes(semconv.ServerAddress(address), semconv.ServerPort(port))
		}
	}
	span.SetAttributes(attrs...)
}

// fullURL is url.full: the URL sent, redacted as the semantic
// conventions ask. No userinfo (net/http sends it as an Authorization
// header, not in the URL) and no fragment (never sent); query values are
// REDACTED but for names known to be safe (page, limit, sort, ...), by
// config.RedactURL's rule, as the registry's errors show them.
func fullURL(u *url.URL) string {
	if u.User == nil && u.Fragment == "" && u.RawQuery == "" {
		return u.String()
	}
	v := *u
	v.User, v.Fragment, v.RawFragment = nil, "", ""
	if v.RawQuery == "" {
		return v.String()
	}
	return config.RedactURL(v.String())
}

// headerCopy is the carrier the propagators write an attempt's context
// into: src, the request's headers, until the first Set, which goes
// into a copy of them (dst).
type headerCopy struct {
	src, dst http.Header
}

func (h *headerCopy) headers() http.Header {
	if h.dst != nil {
		return h.dst
	}
	return h.src
}

// Get implements propagation.TextMapCarrier.
func (h *headerCopy) Get(key string) string { return h.headers().Get(key) }

// Keys implements propagation.TextMapCarrier.
func (h *headerCopy) Keys() []string { return propagation.HeaderCarrier(h.headers()).Keys() }

// Set implements propagation.TextMapCarrier.
func (h *headerCopy) Set(key, value string) {
	if h.dst == nil {
		h.dst = h.src.Clone()
		if h.dst == nil {
			h.dst = make(http.Header)
		}
	}
	h.dst.Set(key, value)
}

// endAttempt ends an attempt's span with its status, or its transport
// error.
func endAttempt(span trace.Span, resp *http.Response, err error) {
	switch {
	case !span.IsRecording():
	case err != nil:
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, err.Error())
	default:
		endWithStatus(span, resp, semconv.NetworkProtocolVersion(protocolVersion(resp)))
	}
	span.End()
}

// protocolVersion is network.protocol.version of a response: "1.1", "2".
func protocolVersion(resp *http.Response) string {
	switch {
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 1:
		return "1.1"
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 0:
		return "1.0"
	case resp.ProtoMinor == 0:
		return strconv.Itoa(resp.ProtoMajor)
	}
	return strconv.Itoa(resp.ProtoMajor) + "." + strconv.Itoa(resp.ProtoMinor)
}
