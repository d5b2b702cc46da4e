// Command bookstore is a small hexagonal service over an outbound
// registry: it takes orders, checks the stock with the inventory system
// and registers the payment with the payment provider.
//
//	domain/    the order, its rules and the ports it needs (no imports
//	           beyond the standard library)
//	outbound/  the driven adapters: the ports over adapters/inventory and
//	           adapters/payments, their errors translated into the domain's
//	httpapi/   the driving adapter: POST /orders
//	main.go    wiring: the registry from the environment, the HTTP server,
//	           probes, graceful shutdown
//
// Every outbound setting comes from the environment (INVENTORY_*,
// PAYMENTS_*; see `outbound env --system inventory --system payments`); a
// bad environment stops the process at start with the full report on
// stderr and exit status 1.
//
// Usage:
//
//	INVENTORY_BASE_URL=... PAYMENTS_BASE_URL=... bookstore [--addr :8080] [--shutdown-timeout 10s]
//	bookstore check-config [--file F] [--json]
//
// check-config checks the environment without starting the service: the
// report and exit codes of `outbound check` (0 valid, 1 invalid, 2
// usage), with the code defaults of inventory and payments, which
// `outbound check` cannot know (package config/configcheck). The
// Kubernetes example runs it as an initContainer.
//
// It serves POST /orders (see package httpapi), GET /healthz (liveness)
// and GET /readyz (readiness with every system's breaker, package health).
// SIGINT or SIGTERM stops it gracefully: the listener closes, requests in
// flight finish within --shutdown-timeout, then the registry closes.
package main
