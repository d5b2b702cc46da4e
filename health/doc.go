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
//
// Readiness follows only what this pod's own breaker concluded. A
// breaker at BREAKER_SCOPE=fleet is shared: one pod's trip opens it on
// every pod, so a probe that followed it would make every pod unready at
// once, Kubernetes would remove every endpoint of the Service, and the
// service's callers would meet connection errors instead of its fast
// answers. An operator's forced open asks that calls be refused, not that
// pods leave the Service. Neither makes a pod unready under
// [CriticalSystems]; the report shows both.
package health
