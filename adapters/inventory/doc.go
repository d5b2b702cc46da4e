// Package inventory is a sample outbound adapter: it answers "how many
// copies of this book are in stock?" by calling the inventory system's
// GET /stock/{isbn}.
//
// The package owns the system's declaration ([System]) and its code
// defaults, so the timeouts of the call sit next to the code that makes
// it. A service declares it once at start:
//
//	reg, err := registry.FromEnv(inventory.System, payments.System)
//	...
//	stock := inventory.New(reg.MustClient(inventory.Name))
//
// # Ports
//
// [StockChecker] is the port this adapter implements. In a hexagonal
// service the domain owns its ports, so the domain declares its own
// interface of the same shape and [*Adapter] satisfies it without either
// package importing the other; StockChecker is here for services that
// have no domain package of their own, and as the compile-time check that
// the shape does not drift. Errors follow the domain's vocabulary:
// [ErrUnknownBook] for a 404, and otherwise the adapters package's errors,
// which adapters.Degradable sorts into "serve a fallback" or "fail".
package inventory
