// Package health serves Kubernetes readiness and liveness probes for a
// service that calls external systems through a registry.
//
//	mux.Handle("/livez", health.Liveness())
//	mux.Handle("/readyz", health.Readiness(reg, health.CriticalSystems("payments")))
//
// [Liveness] always answers 200 and never looks at upstreams: a failing
// dependency is no reason to restart the pod, and restarting it would
// not help. [Readiness] answers with a JSON snapshot of every system
// (breaker state, calls in flight, bulkhead capacity) and 200 when the
// [Policy] finds the service ready, 503 with the reasons when not, so
// Kubernetes takes the pod out of the Service's endpoints while a
// dependency it cannot work without is down.
//
// Readiness reads the registry's Status only: no probe ever sends a
// request upstream.
package health
