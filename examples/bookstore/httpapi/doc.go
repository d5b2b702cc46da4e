// Package httpapi is the bookstore's driving adapter: the HTTP API that
// turns a request into a call of the domain and the domain's answer into
// a status.
//
//	POST /orders {"isbn": "...", "qty": n}
//
// answers
//
//	201 the paid order
//	400 a malformed request or an invalid order
//	402 the payment was declined
//	404 the inventory does not know the book
//	409 fewer copies in stock than ordered
//	503 inventory or payments is unavailable now (breaker open, bulkhead
//	    full, timeout, 5xx): the order was NOT placed; Retry-After says when
//	    to try again, with the same Idempotency-Key
//	504 the caller's X-Time-Budget ran out: at once, before any call, when
//	    it is already spent (capbudget.Middleware answers a budget of 0;
//	    the registry refuses a budget smaller than its reserve with no I/O)
//
// A client should send an Idempotency-Key with each order: the order ID is
// derived from it, and the payment's idempotency key from the order ID, so
// a retry after a 503 or a lost answer charges at most once. Without one
// the order gets a random ID.
//
// Errors are JSON: {"error": "out_of_stock", "message": "..."}.
package httpapi
