package otel

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbound-go/outbound/config"
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
	span trace.Span
	sent atomic.Int32 // attempts sent so far
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
// returned, unchanged.
func (t *callTracer) RoundTrip(req *http.Request) (*http.Response, error) {
	method, _ := knownMethod(req.Method)
	ctx, span := t.i.tracer.Start(req.Context(), spanName(method), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method), t.s.attr))
	c := &call{span: span}
	resp, err := t.next.RoundTrip(req.WithContext(context.WithValue(ctx, callKey{}, c)))
	endCall(c, resp, err)
	return resp, err
}

// endCall ends a call's span with the status the caller got, or the
// registry's error: its op as error.type, and a refusal as an event.
func endCall(c *call, resp *http.Response, err error) {
	span := c.span
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(AttemptsKey.Int(int(c.sent.Load())))
	var re *registry.Error
	switch {
	case errors.As(err, &re):
		span.SetAttributes(semconv.ErrorTypeKey.String(errorTypeOr(errorType(0, re.Op))))
		if out := re.Op.Outcome(false); out.Refused() {
			span.AddEvent(RefusalEvent, trace.WithAttributes(
				RefusalReasonKey.String(re.Op.Reason()), OutcomeKey.String(out.String())))
		}
		span.SetStatus(codes.Error, err.Error())
	case err != nil:
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, err.Error())
	default:
		endWithStatus(span, resp)
	}
	span.End()
}

// endWithStatus sets a response's status on span and, for a status of 400
// or more, error.type and the error status (a client's span, as the
// semantic conventions say).
func endWithStatus(span trace.Span, resp *http.Response) {
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
}

func errorTypeOr(et string) string {
	if et == "" {
		return semconv.ErrorTypeOther.Value.AsString()
	}
	return et
}

// spanName is a span's name as the semantic conventions give it: the
// method, or "HTTP" for a method they do not know.
func spanName(method string) string {
	if method == "_OTHER" {
		return "HTTP"
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
	c, _ := ctx.Value(callKey{}).(*call)
	resend := 0
	if c != nil {
		resend = int(c.sent.Add(1)) - 1
	}
	method, known := knownMethod(req.Method)
	host, port := t.s.urlHostPort(req.URL)
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method), semconv.ServerAddress(host), semconv.ServerPort(port), t.s.attr)
	if resend > 0 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(resend))
	}
	if !known {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(req.Method))
	}
	ctx, span := t.i.tracer.Start(ctx, spanName(method), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if span.IsRecording() {
		// The URL as the registry's errors show it: no userinfo, no
		// token-like query value.
		span.SetAttributes(semconv.URLFull(config.RedactURL(req.URL.String())))
		if c != nil && resend == 0 {
			c.span.SetAttributes(semconv.ServerAddress(host), semconv.ServerPort(port))
		}
	}
	out := req.WithContext(ctx)
	if t.i.inject {
		// The caller's header map is never written: the copy carries
		// the trace context.
		out.Header = req.Header.Clone()
		if out.Header == nil {
			out.Header = make(http.Header)
		}
		t.i.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	}
	inFlight := t.s.activeAttrs(method, host, port)
	t.i.m.active.Inst().Add(ctx, 1, inFlight)
	resp, err := t.next.RoundTrip(out)
	t.i.m.active.Inst().Add(ctx, -1, inFlight)
	endAttempt(span, resp, err)
	return resp, err
}

// endAttempt ends an attempt's span with its status, or its transport
// error.
func endAttempt(span trace.Span, resp *http.Response, err error) {
	if span.IsRecording() {
		if err != nil {
			span.SetAttributes(semconv.ErrorType(err))
			span.SetStatus(codes.Error, err.Error())
		} else {
			if v := protocolVersion(resp); v != "" {
				span.SetAttributes(semconv.NetworkProtocolVersion(v))
			}
			endWithStatus(span, resp)
		}
	}
	span.End()
}

// protocolVersion is network.protocol.version of a response: "1.1", "2".
func protocolVersion(resp *http.Response) string {
	switch {
	case resp.ProtoMajor == 2:
		return "2"
	case resp.ProtoMajor == 1:
		return "1." + strconv.Itoa(resp.ProtoMinor)
	}
	return ""
}
