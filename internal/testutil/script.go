package testutil

import (
	"net/http"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/outboundtest"
)

// ScriptServer is an [outboundtest.Upstream] serving an
// [outboundtest.Script]: it has the methods of both (Requests, Conns,
// InFlight, ... and Hits, Received).
type ScriptServer struct {
	*outboundtest.Upstream
	*outboundtest.Script
}

// Script starts an upstream on 127.0.0.1 that answers with steps in
// order, the last one repeating, e.g.
//
//	srv := testutil.Script(t, outboundtest.Reply{Status: 503}, outboundtest.Reply{Status: 503},
//		outboundtest.Reply{Status: 200, Body: "ok"})
//	// ... exercise the client against srv.URL ...
//	if srv.Hits() != 3 { ... }
func Script(t testing.TB, steps ...outboundtest.Reply) *ScriptServer {
	t.Helper()
	h := outboundtest.NewScript(steps...)
	return &ScriptServer{Upstream: outboundtest.NewUpstream(t, h), Script: h}
}

// FailN returns a script of n responses with status failStatus followed by
// 200 "ok" (which then repeats): Script(t, FailN(2, 503)...).
func FailN(n, failStatus int) []outboundtest.Reply {
	steps := make([]outboundtest.Reply, 0, n+1)
	for range n {
		steps = append(steps, outboundtest.Reply{Status: failStatus})
	}
	return append(steps, outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
}

// LargeBodySize is a body size comfortably larger than the buffers net/http
// uses, so clients must actually drain it to reuse the connection.
const LargeBodySize = 64 << 10

// LargeBody returns a response with the given status and a size-byte body
// (use [LargeBodySize] for 64 KiB), with an explicit Content-Length. Useful to
// check that a client drains error bodies so the connection is reused.
func LargeBody(status, size int) outboundtest.Reply {
	return outboundtest.Reply{
		Status: status,
		Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:   strings.Repeat("e", size),
	}
}
