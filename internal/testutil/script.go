package testutil

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/outboundtest"
)

// Resp is one scripted answer: [outboundtest.Reply].
type Resp = outboundtest.Reply

// Request is what a [ScriptHandler] recorded about one request:
// [outboundtest.Request].
type Request = outboundtest.Request

// ScriptHandler answers requests from a fixed sequence of [Resp]s, in arrival
// order, repeating the last one forever, and records every request it sees:
// [outboundtest.Script]. Use [Script] to get it already mounted on a [Server].
type ScriptHandler = outboundtest.Script

// NewScriptHandler is [outboundtest.NewScript].
func NewScriptHandler(steps ...Resp) *ScriptHandler { return outboundtest.NewScript(steps...) }

// ScriptServer is a [Server] serving a [ScriptHandler]; it has the methods of
// both (Conns, MaxActive, ... and Hits, Received).
type ScriptServer struct {
	*Server
	*ScriptHandler
}

// Script starts a [Server] on 127.0.0.1 that answers with steps in order,
// the last one repeating, e.g.
//
//	srv := testutil.Script(t, testutil.Resp{Status: 503}, testutil.Resp{Status: 503},
//		testutil.Resp{Status: 200, Body: "ok"})
//	// ... exercise the client against srv.URL ...
//	if srv.Hits() != 3 { ... }
func Script(t testing.TB, steps ...Resp) *ScriptServer {
	t.Helper()
	h := NewScriptHandler(steps...)
	return &ScriptServer{Server: NewServer(t, h), ScriptHandler: h}
}

// FailN returns a script of n responses with status failStatus followed by
// 200 "ok" (which then repeats): Script(t, FailN(2, 503)...).
func FailN(n, failStatus int) []Resp {
	steps := make([]Resp, 0, n+1)
	for range n {
		steps = append(steps, Resp{Status: failStatus})
	}
	return append(steps, Resp{Status: http.StatusOK, Body: "ok"})
}

// RetryAfterSeconds is [outboundtest.RetryAfterSeconds]: "Retry-After: <n>".
func RetryAfterSeconds(n int) http.Header { return outboundtest.RetryAfterSeconds(n) }

// RetryAfterDate is [outboundtest.RetryAfterDate]: "Retry-After:
// <HTTP-date>", to the second.
func RetryAfterDate(at time.Time) http.Header { return outboundtest.RetryAfterDate(at) }

// LargeBodySize is a body size comfortably larger than the buffers net/http
// uses, so clients must actually drain it to reuse the connection.
const LargeBodySize = 64 << 10

// LargeBody returns a response with the given status and a size-byte body
// (use [LargeBodySize] for 64 KiB), with an explicit Content-Length. Useful to
// check that a client drains error bodies so the connection is reused.
func LargeBody(status, size int) Resp {
	return Resp{
		Status: status,
		Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:   strings.Repeat("e", size),
	}
}
