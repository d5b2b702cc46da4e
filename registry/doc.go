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
//	Do / HTTPClient().Do
//	  └─ bulkhead   one of MAX_CONCURRENT permits, held until the body is closed
//	      └─ budget   deadline = min(CALL_TIMEOUT, caller's remaining - reserve)
//	          └─ retry   idempotent requests only, backoff + jitter, Retry-After
//	              └─ breaker   per attempt; open means fail fast, no I/O
//	                  └─ transport   connect, TLS and response-header timeouts
//
// Fast failures cost no I/O and no goroutine: a full bulkhead returns an
// error matching bulkhead.ErrFull, an open breaker one matching
// [ErrCircuitOpen], a spent caller budget one matching
// capbudget.ErrExhausted. Every error a call returns is, or wraps, an
// [*Error] naming the system.
//
// As with http.Client, 4xx and 5xx responses are responses, not errors:
// when retries run out on a status the caller gets the last response.
// The caller must close the response body; a forgotten body still gives
// its bulkhead permit back when the call's deadline fires.
package registry
