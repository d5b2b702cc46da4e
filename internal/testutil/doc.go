// Package testutil holds fault-injecting HTTP servers and listeners for outbound's tests; it is internal and not API.
//
// Every helper binds 127.0.0.1 only, takes a testing.TB and registers its own
// teardown with t.Cleanup, so no goroutine, socket or file descriptor outlives
// the test that created it (outbound's tests run under goleak.VerifyTestMain).
//
// The fault servers and handlers are those of the public test kit,
// [github.com/outbound-go/outbound/outboundtest], under the names outbound's
// own tests were written with: [Server] is an outboundtest.Upstream, [Resp]
// an outboundtest.Reply, [Gate] an outboundtest.Hang, and so on. What lives
// only here is what the kit does not offer: scripts built with [FailN] and
// [LargeBody], the listeners, the certificates and [CheckFDs].
//
// # Servers
//
// [NewServer] (and [NewTLSServer]) is the common base: an *httptest.Server that
// counts connections opened ([Server.Conns]), requests ([Server.Requests]) and
// concurrently running handlers ([Server.Active], [Server.MaxActive]). Any
// handler can be mounted on it; the helpers below are plain http.Handlers so
// they compose:
//
//	srv := testutil.Script(t, testutil.FailN(2, 503)...)    // 503, 503, 200 "ok", 200 "ok", ...
//	srv := testutil.Script(t,
//		testutil.Resp{Handler: testutil.Reset()},             // 1st attempt: connection reset
//		testutil.Resp{Status: 429, Header: testutil.RetryAfterSeconds(1)},
//		testutil.Resp{Status: 200, Body: "ok"})               // then 200 forever
//	srv := testutil.NewServer(t, testutil.SlowHeaders())    // response headers never arrive
//	srv := testutil.NewServer(t, testutil.Trickle(900*time.Millisecond))
//
// # Stopping hung handlers
//
// httptest.Server.Close waits for in-flight requests, so a handler that hangs
// would hang the test's cleanup. Each Server therefore owns a stop channel that
// its cleanup closes before calling Close; every waiting helper here selects on
// both r.Context().Done() and that channel (see [Stopped] and [Wait]), and the
// Server additionally expires the read/write deadlines of in-flight connections
// when it stops, so even a handler blocked reading a stalled request body is
// released. Custom handlers that wait should use [Wait] or select on
// [Stopped](r) as well.
//
// When a wait is cut short the helpers abort the response with
// http.ErrAbortHandler, so the client sees a broken connection rather than a
// made-up 200.
//
// # Listeners
//
// [Blackhole] returns an address whose TCP connects hang (full accept
// backlog), [RefusedAddr] one whose connects are refused, and [TLSHang] one
// that accepts connections but never answers, so TLS handshakes (or HTTP
// response headers) time out.
//
// # Assertions on errors
//
// Tests built on these helpers should assert the kind of a failure
// (net.Error.Timeout(), errors.Is(err, syscall.ECONNRESET), io.EOF,
// context.DeadlineExceeded) and never its exact duration: socket timing on a
// loaded CI machine is not reliable.
package testutil
