// Package payments is a sample outbound adapter: it registers the payment
// of an order with the payment provider's POST /payments.
//
// The package owns the system's declaration ([System]) with code defaults
// that deviate from the baseline, each with its reason, and the rule that
// makes retrying a POST safe: every request carries an Idempotency-Key
// derived from the order ("order-<id>"), so a replay after a timeout or a
// 503 is recognised by the provider and charges once.
//
// [Registrar] is the port [*Adapter] implements; as in package inventory,
// a hexagonal domain declares its own interface of the same shape.
package payments
