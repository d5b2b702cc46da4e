// Package refusal makes the response with which registry.HTTPClient
// answers a call it refused before sending anything: a 503 that every
// SDK family stops on. It is internal: the registry documents the
// response (registry.RefusedHeader).
package refusal

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/ratelimit"
	"github.com/outbound-go/outbound/observe"
)

// The headers that mark a refusal: the reason, and the system; and those
// that mark a call given up on with an error: the op, and the attempts
// sent.
const (
	Header         = "X-Outbound-Refused"
	SystemHeader   = "X-Outbound-System"
	GaveUpHeader   = "X-Outbound-Gave-Up"
	AttemptsHeader = "X-Outbound-Attempts"
)

// Reason is what a refusal response says: the system, the reason
// ("breaker-open"), the error's text, and the Retry-After to send ("":
// none).
type Reason struct {
	System, Reason, Message, RetryAfter string
}

// Response is the answer to req, refused for r: 503 Service Unavailable
// with
//
//	X-Should-Retry: false        (openai-go and other Stainless SDKs)
//	Stripe-Should-Retry: false   (stripe-go)
//	X-Outbound-Refused: <reason>
//	X-Outbound-System: <system>
//	Retry-After: r.RetryAfter, when set
//	Content-Type: application/problem+json
//
// and the body
//
//	{"type":"urn:outbound:refused:<reason>","title":"refused by outbound: <reason>",
//	 "status":503,"detail":<message>,"system":<system>,"reason":<reason>,
//	 "error":{"type":"outbound_refused","code":<reason>,"message":<message>}}
//
// The body says why twice over. It is a problem detail (RFC 9457), the
// HTTP way, with one extension member, "error", in the shape most APIs
// and their SDKs use for errors. The second is not decoration: an SDK
// that cannot read an error body as its own shape may take it for a
// network failure and retry it whatever the headers say (stripe-go does),
// so the one shape every SDK family reads is the one that stops them all.
func Response(req *http.Request, r Reason) *http.Response {
	h := make(http.Header, 8)
	h["Content-Type"] = []string{"application/problem+json"}
	h["X-Should-Retry"] = []string{"false"}
	h["Stripe-Should-Retry"] = []string{"false"}
	h[Header] = []string{r.Reason}
	h[SystemHeader] = []string{r.System}
	if r.RetryAfter != "" {
		h["Retry-After"] = []string{r.RetryAfter}
	}
	b, _ := json.Marshal(struct {
		Type   string   `json:"type"`
		Title  string   `json:"title"`
		Status int      `json:"status"`
		Detail string   `json:"detail"`
		System string   `json:"system"`
		Reason string   `json:"reason"`
		Error  apiError `json:"error"`
	}{"urn:outbound:refused:" + r.Reason, "refused by outbound: " + r.Reason, http.StatusServiceUnavailable,
		r.Message, r.System, r.Reason, apiError{"outbound_refused", r.Reason, r.Message}})
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	return &http.Response{
		Status:     "503 Service Unavailable",
		StatusCode: http.StatusServiceUnavailable,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
		Request:       req,
	}
}

// maxFinalBody is the most of an upstream's non-JSON body that a final
// answer keeps, as its message.
const maxFinalBody = 1 << 10

// Final marks resp, an error status the registry retried and gave up on,
// as the final answer for an SDK: X-Should-Retry and Stripe-Should-Retry
// "false", so that the SDK's own retries do not multiply the registry's.
// A body that is not JSON (a gateway's HTML or text error page) becomes
// the common error envelope
//
//	{"error":{"type":"outbound_gave_up","code":"status_503","message":<the body's first KiB>}}
//
// with the original type in X-Outbound-Original-Content-Type: an SDK
// that cannot read an error body as its own shape may retry it whatever
// the headers say (stripe-go does). A JSON body is left as it is.
func Final(resp *http.Response) {
	resp.Header.Set("X-Should-Retry", "false")
	resp.Header.Set("Stripe-Should-Retry", "false")
	ct := resp.Header.Get("Content-Type")
	if strings.Contains(ct, "json") || resp.Body == nil {
		return
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxFinalBody))
	_ = resp.Body.Close()
	b, _ := json.Marshal(struct {
		Error apiError `json:"error"`
	}{apiError{"outbound_gave_up", "status_" + strconv.Itoa(resp.StatusCode), strings.TrimSpace(string(head))}})
	if ct != "" {
		resp.Header.Set("X-Outbound-Original-Content-Type", ct)
	}
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	resp.Header.Del("Content-Encoding")
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
}

// Ended is what a call given up on with an error says: the system, the
// op that ended its last attempt, the attempts sent, the error's text.
type Ended struct {
	System   string
	Op       observe.Op
	Attempts int
	Message  string
}

// GaveUp is the answer to req, a replayable call that the registry
// retried and gave up on with an error (a timeout, a transport error):
// 504 Gateway Timeout for a timeout, 502 Bad Gateway otherwise, with
//
//	X-Should-Retry: false
//	Stripe-Should-Retry: false
//	X-Outbound-Gave-Up: <op>          ("read timeout", "connect", ...)
//	X-Outbound-Attempts: <attempts>
//	X-Outbound-System: <system>
//	Content-Type: application/json
//
// and the common error envelope, which every SDK family reads as its own
// error and stops on
//
//	{"error":{"type":"outbound_gave_up","code":<op, "_" for " ">,"message":<message>}}
func GaveUp(req *http.Request, e Ended) *http.Response {
	status := http.StatusBadGateway
	if e.Op.Timeout() {
		status = http.StatusGatewayTimeout
	}
	b, _ := json.Marshal(struct {
		Error apiError `json:"error"`
	}{apiError{"outbound_gave_up", Code(e.Op), e.Message}})
	h := make(http.Header, 8)
	h["Content-Type"] = []string{"application/json"}
	h["X-Should-Retry"] = []string{"false"}
	h["Stripe-Should-Retry"] = []string{"false"}
	h[GaveUpHeader] = []string{e.Op.String()}
	h[AttemptsHeader] = []string{strconv.Itoa(e.Attempts)}
	h[SystemHeader] = []string{e.System}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	return &http.Response{
		Status:     strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode: status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
		Request:       req,
	}
}

// Code is the error code of a call given up on with op in the envelope:
// the op's name with "_" for each space ("read_timeout").
func Code(op observe.Op) string { return strings.ReplaceAll(op.String(), " ", "_") }

// apiError is the common error envelope's "error" member.
type apiError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Cause is the cause of a refusal by op, as the refusing stage gives it:
// a shared, immutable value that matches the registry's sentinel.
func Cause(op observe.Op) error {
	switch op {
	case observe.OpBreaker:
		return breaker.Open
	case observe.OpForcedOpen:
		return breaker.ForcedOpen
	case observe.OpBulkhead:
		return bulkhead.ErrFull
	case observe.OpRateLimit:
		return ratelimit.ErrLimited
	}
	return capbudget.ErrExhausted
}
