// Package outbound holds the bookstore's driven adapters: it implements
// the domain's ports over the library's sample adapters
// (adapters/inventory, adapters/payments) and translates their errors
// into the domain's words, so the domain never sees an HTTP status, a
// breaker or a registry.
//
// The translation, in order:
//
//   - the caller's budget is spent (capbudget.ErrExhausted) or its context
//     is done: domain.ErrNoTime;
//   - the adapter's own refusals: domain.ErrUnknownBook,
//     domain.ErrPaymentDeclined;
//   - adapters.Degradable (breaker open, bulkhead full, timeout, 5xx, 429):
//     a *domain.UnavailableError naming the system, with the upstream's
//     Retry-After hint;
//   - anything else is returned as is: a bug or a contract violation, which
//     the HTTP layer answers with 500.
package outbound
