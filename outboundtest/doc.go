// Package outboundtest is outbound's test kit: fake upstreams on loopback
// that misbehave on a script, for testing the adapters a service writes on
// top of a registry against the failures the registry exists for.
//
// It uses only the standard library, so the tests of any package (outbound's
// own included) can import it. Its companion package
// [github.com/outbound-go/outbound/outboundtest/registrytest] builds a
// registry from an in-code map of variables and checks, at the end of a
// test, that the pipeline was left clean.
//
// # Upstreams
//
// [NewUpstream] starts an HTTP/1.1 server on 127.0.0.1 serving any
// http.Handler, and closes it in t.Cleanup. It counts what reached it on the
// wire: requests ([Upstream.Requests]), connections accepted
// ([Upstream.Conns]) and still open ([Upstream.OpenConns]), handlers running
// now ([Upstream.InFlight]) and at most ([Upstream.MaxInFlight]).
//
//	up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
//	env := map[string]string{"OUTBOUND_SYSTEMS": "inventory", "INVENTORY_BASE_URL": up.URL}
//
// # Behaviours
//
// Every behaviour is a plain http.Handler, so they compose with each other
// and with a test's own handlers:
//
//   - [Healthy]: 200 "ok"; [Reply]: any status, header, body and delay.
//   - [SlowHeaders]: the response headers come after a delay.
//   - [Trickle]: headers at once, then one body byte per interval.
//   - [Reset] and [ResetMidBody]: the connection is reset (RST) before
//     the response or after part of its body; [EOF]: closed without an
//     answer.
//   - [NewHang]: requests wait until [Hang.Release].
//   - [Storm]: a run of 503s, then 200s.
//   - [Throttle] and [ThrottleUntil]: 429 with Retry-After in seconds or as
//     an HTTP date.
//   - [Flap] and [FlapClock]: healthy and failing in turns, on a schedule
//     of request counts or of an injected clock.
//   - [NewScript]: a sequence of [Reply]s in arrival order, every request
//     recorded.
//
// # Stopping
//
// httptest.Server.Close waits for the handlers still running, so a handler
// that hangs would hang the test's cleanup. Every Upstream therefore stops
// first: it closes a stop channel that every waiting behaviour selects on
// (beside r.Context().Done()) and expires the deadlines of the connections
// in flight, then closes. A custom handler that waits should use [Wait] or
// select on [Stopped]. A wait cut short aborts the response
// (http.ErrAbortHandler), so the client sees a broken connection, never a
// made-up answer.
//
// # Assertions
//
// Assert the kind of a failure (a timeout, a reset, an EOF, a status) and
// the counts, not durations: socket timing on a loaded CI machine is not
// reliable. Durations are only ever lower bounds here.
package outboundtest
