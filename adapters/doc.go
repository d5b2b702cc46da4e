// Package adapters holds the building blocks of outbound adapters: small
// functions that make a JSON call through a [registry.Client] and turn the
// answer into a value or an error a domain can act on.
//
// An outbound adapter, in the hexagonal sense, implements a port the domain
// declares ("give me the stock of this book") on top of one external
// system. It never builds an http.Client: it gets the system's
// [registry.Client] by name, so the timeouts, bulkhead, retries and breaker
// come from the system's configuration. The sample adapters in
// adapters/inventory and adapters/payments show the shape; each declares its
// system and that system's code defaults next to the code that calls it.
//
// # Calls
//
// [GetJSON] and [DoJSON] build the request from the client's BASE_URL and
// path parts, each escaped with url.PathEscape, so an ISBN with a '/' or a
// space stays one path segment. They set Accept (and Content-Type for a
// body), send the body from a bytes.Reader so the registry can replay it on
// a retry, check the status, decode at most [DefaultMaxBody] bytes of JSON
// ([WithMaxBody] changes the limit), and always drain and close the body so
// the connection goes back to the pool.
//
// # Errors
//
// A call returns one of:
//
//   - the registry's error (an [*registry.Error]) when no response came:
//     open breaker, full bulkhead, spent budget, timeouts, transport errors;
//   - a [*StatusError] for a non-2xx response, with the status, the first
//     256 bytes of the body and the Retry-After hint; a 404 also matches
//     [ErrNotFound] with errors.Is;
//   - [ErrBodyTooLarge] or a decode error when the answer is not the JSON
//     expected;
//   - [ErrBadPath] for a path part that cannot be one segment.
//
// [Degradable] sorts them for the domain: true when the system is
// unavailable right now (breaker open, bulkhead full, timeout, budget
// spent, a temporary status: 408, 429, 500, 502, 503 or 504, a broken
// connection), so the adapter's caller may serve a cached or default value
// or degrade the feature; false for answers that say the request itself
// is wrong (other 4xx, and 5xx such as 501 or 505), for bad
// answers, and for the caller's own cancellation.
package adapters
