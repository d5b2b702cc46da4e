// Package registry builds one isolated, resilient HTTP client per external
// system and looks them up by name.
//
// [FromEnv] loads and validates every system's settings (see package
// config), then gives each system its own http.Transport and connection
// pool, bulkhead, circuit breaker and retry policy: nothing is shared, so
// one failing system cannot slow or fail calls to another.
//
// Every call runs this pipeline, outer to inner; read the files in this
// order to follow one call from the entry to the wire:
//
//	Do / HTTPClient().Do          client.go   entry (maybe traced: observe.Tracer)
//	  refuse     no I/O           admit.go    closed, other origin, budget spent, breaker open
//	  bulkhead   MAX_CONCURRENT   admit.go    one permit, BULKHEAD_MAX_WAIT
//	  budget     CALL_TIMEOUT     admit.go    min(CALL_TIMEOUT, caller's budget - 100ms)
//	  adaptive   (ADAPTIVE_...)   adaptive.go latency per call, for an adaptive limit
//	  redirect   (FOLLOW_...)     redirect.go each hop inside the one permit and deadline
//	  retry      RETRIES          retry.go    backoff, Retry-After, retry budget (retry_budget.go)
//	  hedge      (HEDGE_DELAY)    hedge.go    copies of a late attempt; else report
//	  breaker    per attempt      breaker.go  the system's Circuit (gobreaker, or a fleet's)
//	  rate       (RATE_LIMIT)     rate.go     a token per request that leaves (local or a fleet share)
//	  fault      (OUTBOUND_FAULTS) fault.go   drills
//	  transport  the system's     send.go     connect, TLS and header timeouts, own pool (transport.go)
//
// One call is one value (call.go) that the stages pass on; each stage is
// a type built once per client (client.go, buildChain), and a stage whose
// setting is off is not in the chain. The response body carries the
// permit back (body.go, permit.go). What only the stages use is beside
// them: the origin rules (origin.go), each attempt's request
// (request.go), how a failure reads (cause.go), the drain of a body
// (drain.go) and a stream's idle bound (stream.go). How a call or an attempt ends is said once, in
// report.go, with the vocabulary of package observe.
//
// Only idempotent requests are retried or hedged: a safe method or an
// Idempotency-Key, and a body GetBody can produce again. 408, 429, 500,
// 502, 503 and 504 are temporary (retried); the breaker counts those,
// every other 5xx, transport errors and attempt timeouts as failures. The
// server's own word wins over the status: X-Should-Retry or
// Stripe-Should-Retry "false" is never retried, "true" makes an error
// status retryable for a replayable request.
//
// A system is one origin: a request whose absolute URL is not BASE_URL's
// scheme, host and port is refused before any I/O ([ErrOtherOrigin]), and
// so is a relative path that climbs above BASE_URL's ([ErrPathEscapesBase]).
// Redirects (FOLLOW_REDIRECTS=same-host, the baseline) are followed only
// under BASE_URL's origin and path; with "any", credentials (API keys
// included) and X-Time-Budget stay behind once a hop leaves them. A call
// made with [WithStream] bounds its body by an idle time between reads
// instead of CALL_TIMEOUT.
//
// Fast failures cost no I/O and no goroutine, and allocate only the
// caller's own error: a full bulkhead matches bulkhead.ErrFull, an open
// breaker [ErrCircuitOpen], a spent caller budget capbudget.ErrExhausted.
// [Client.Do] returns an [*Error] naming the system, the stage and the
// cause; HTTPClient().Do a *url.Error wrapping one. Both are redacted.
// HTTPClient answers refusals with a made-up 503 that SDKs do not retry
// instead ([RefusedHeader], [Refusal]), and a replayable call it retried
// and gave up on with an error (a timeout, a transport error) with a
// made-up 504 or 502 that they do not retry either ([GaveUpHeader],
// [GaveUp]).
//
// As with http.Client, 4xx and 5xx responses are responses, not errors:
// when retries run out on a status, or the breaker would refuse the retry
// (the attempt may have opened it), the caller gets the last response. A
// retry refused after a failure that left no response (the breaker or
// the rate limit) ends the call as when retries run out: an [*Error] of
// the last failure's op and the attempts sent, the refusal joined to its
// cause (so it still matches [ErrCircuitOpen] or [ErrRateLimited]), and
// the call counts as sent, not refused.
// The caller must close the response body; a forgotten body still gives
// its bulkhead permit back when the call's deadline fires.
//
// At BREAKER_SCOPE=fleet the breaker stage's [Circuit] is the one the
// fleet option gives ([WithFleet], from module
// github.com/outbound-go/outbound/fleet). The registry asks its [Fleet]
// for each such circuit (and each quota at RATE_SCOPE=fleet) in one call,
// telling it of the system in a [FleetSystem], the registry's logger
// included: the fleet logs through it. The core itself never talks to
// Redis. Drills (OUTBOUND_FAULTS=on) inject faults before the transport
// (docs/fault-drills.md).
package registry
