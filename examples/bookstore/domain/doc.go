// Package domain is the bookstore's core: an order, the rules for placing
// one, and the ports it needs from the outside world. It imports nothing
// but the standard library: no HTTP, no registry, no adapter.
//
// The ports, [StockChecker] and [PaymentRegistrar], are declared here
// because the domain owns them: it says what it needs and in which words
// failures come back ([ErrUnknownBook], [ErrPaymentDeclined],
// [*UnavailableError], [ErrNoTime]). The bookstore's outbound package
// implements them over the library's sample adapters and translates their
// errors into these.
package domain
