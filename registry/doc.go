// Package registry builds one isolated, resilient HTTP client per external
// system and looks them up by name.
//
// [FromEnv] loads and validates every system's settings (see package
// config), then gives each system its own http.Transport and connection
// pool, bulkhead, circuit breaker and retry policy: nothing is shared, so
// one failing system cannot slow or fail calls to another.
//
// Every call runs this pipeline, outer to inner:
//
//	Do / HTTPClient().Do                     call, refuse   pipeline.go
//	  └─ bulkhead   MAX_CONCURRENT permits    admit
//	      └─ budget   min(CALL_TIMEOUT, ...)  capCall
//	          └─ retry   backoff, Retry-After  retry          retry.go
//	              └─ breaker   per attempt     pass           breaker.go
//	                  └─ transport             send           send.go
//
// The bulkhead permit is held until the body is closed (body.go). The
// budget's deadline is min(CALL_TIMEOUT, the caller's remaining budget
// less a 100ms reserve), redirects and body included. Only idempotent
// requests are retried, with backoff and full jitter, honouring
// Retry-After, within a retry budget. An open breaker fails fast, with no
// I/O. The transport has the system's connect, TLS and response-header
// timeouts and its own pool.
//
// Which statuses are temporary (retried), what the breaker counts, how
// Retry-After is read and how long backoff waits are stated once, in
// internal/policy: 408, 429, 500, 502, 503 and 504 are temporary; the
// breaker counts those, every other 5xx, transport errors and attempt
// timeouts as failures.
//
// Fast failures cost no I/O and no goroutine: a full bulkhead returns an
// error matching bulkhead.ErrFull, an open breaker one matching
// [ErrCircuitOpen], a spent caller budget one matching
// capbudget.ErrExhausted. Each rejection allocates only its own error:
// no error value is shared between calls. [Client.Do] returns an [*Error]
// naming the system, the stage and the cause; HTTPClient().Do a *url.Error
// wrapping one. Both are redacted.
//
// As with http.Client, 4xx and 5xx responses are responses, not errors:
// when retries run out on a status the caller gets the last response.
// The caller must close the response body; a forgotten body still gives
// its bulkhead permit back when the call's deadline fires.
//
// Drills: with OUTBOUND_FAULTS=on and a system's FAULT_* settings, the
// send stage aborts or delays a fraction of attempts before the transport
// (fault.go), so the outer stages see them as real faults; observers,
// logs and Status mark them injected (docs/fault-drills.md).
package registry
