// Package testutil holds what outbound's own tests need beyond the public
// test kit ([github.com/outbound-go/outbound/outboundtest]): scripted
// servers built with [Script], [FailN] and [LargeBody]; listeners whose
// connects hang ([Blackhole]), are refused ([RefusedAddr]) or whose TLS
// handshakes never finish ([TLSHang]); test certificates ([NewCA],
// [SelfSigned]) and files ([WriteFile], [ReplaceFile]); and [CheckFDs].
// Upstreams, fault handlers and hangs come from outboundtest itself. It is
// internal and not API.
//
// Every helper binds 127.0.0.1 only, takes a testing.TB and registers its
// own teardown with t.Cleanup, so no goroutine, socket or file descriptor
// outlives the test that created it (outbound's tests run under
// goleak.VerifyTestMain).
//
// Tests built on these helpers assert the kind of a failure
// (net.Error.Timeout(), errors.Is(err, syscall.ECONNRESET), io.EOF,
// context.DeadlineExceeded), never its exact duration: socket timing on a
// loaded CI machine is not reliable.
package testutil
