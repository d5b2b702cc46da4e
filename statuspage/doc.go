// Package statuspage serves a live HTML status page of a registry's
// systems: breaker state, calls in flight against the bulkhead's
// capacity, counters, retries, rejections, recent latency percentiles,
// the last error and the effective configuration (redacted).
//
//	rec := statuspage.NewRecorder()
//	reg, err := registry.FromEnvWith(nil, registry.WithObserver(rec))
//	if err != nil { ... }
//	defer reg.Close()
//	admin.Handle("/debug/outbound/", http.StripPrefix("/debug/outbound", statuspage.Handler(reg, rec)))
//
// The page is one self-contained HTML file embedded in the binary:
// inline CSS and JavaScript, no CDN, no build step, a strict
// Content-Security-Policy. It polls status.json, served by the same
// handler next to it, every second and updates in place, so a breaker
// that opens turns red without a reload. Both URLs are relative: mount
// the handler under any prefix.
//
// The [Recorder] is the observer that supplies what Status cannot: the
// durations of the last [RingSize] calls of each system (for p50, p90,
// p99 and max); the calls that ended over the last [RateWindow], refused
// ones included and counted apart (calls/s and refused/s: a breaker
// refusing 100 calls a second reads 100 and 100, not idle); when the
// breaker last changed state; the last failure of a call that was sent
// (a refusal is none); the last failed attempt the breaker counted,
// which an open breaker shows as the failure that opened it, even when
// the call ended as a refusal of its retry; and the calls the caller's
// deadline ended. An open breaker says when it turns half-open (its
// opening plus BREAKER_OPEN_TIMEOUT), an override when it ends.
//
// Colour says what needs a look: red for failures and refusals, amber
// for retries and deadlines, plain for information. Budget capped (calls
// whose deadline the caller's budget set, sooner than CALL_TIMEOUT) is
// information: usual, even for every call, when callers set deadlines.
// It is plain until a capped call runs out of its budget (budget ran
// out, op budget timeout), then amber. The page's footer says so.
//
// [Controls] serves an operator's overrides of the breakers. Who can use
// them is who can reach the admin listener and send what a web page
// cannot: a POST with the header [ControlHeader] (a browser sends a
// custom header to another origin only after a CORS preflight, which the
// controls never grant), a Host that names the listener (an IP address,
// localhost, or a name given with [WithHosts]; a name nobody listed is
// what DNS rebinding sends), and, when a browser marks it, an Origin of
// the same host and no Sec-Fetch-Site of another site. A page open in an
// operator's browser, even on a subdomain of the same site, is refused
// with 403. Anyone else who reaches the port can change a breaker: keep
// the listener on a network only operators reach, or give the controls
// a token with [WithToken] (a variable, [TokenVar], by convention) when
// the port is reachable more widely.
package statuspage
