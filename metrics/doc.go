// Package metrics exports outbound's per-system metrics to Prometheus.
//
// The observer must exist before the registry it observes, and the
// gauges need the registry, so wiring takes three lines:
//
//	m := metrics.New(prometheus.DefaultRegisterer)            // counters and histograms, fed by events
//	reg, err := registry.FromEnvWith(nil, registry.WithObserver(m))
//	if err != nil { ... }
//	defer reg.Close()
//	if err := m.Watch(reg); err != nil { ... }                 // gauges read from reg.Status() at scrape time
//
// Metrics, all labelled by system:
//
//	outbound_calls_total{system,outcome}              counter   calls, by how they ended (ok, gave_up, breaker_open, bulkhead_full, budget_spent, retry_throttled, canceled)
//	outbound_attempts_total{system,outcome}           counter   attempts, by how they ended (ok, retry, gave_up = failed and last, breaker_open = refused, canceled, hedge_lost)
//	outbound_retries_total{system}                    counter   retries sent to the upstream (attempts after the first)
//	outbound_call_duration_seconds{system}            histogram calls that sent at least one attempt, entry to response headers
//	outbound_attempt_duration_seconds{system}         histogram attempts sent to the transport
//	outbound_breaker_transitions_total{system,from,to} counter  breaker state changes
//	outbound_breaker_state{system}                    gauge     0 closed, 1 half-open, 2 open          (Watch)
//	outbound_bulkhead_in_flight{system}               gauge     calls holding a permit                  (Watch)
//	outbound_bulkhead_capacity{system}                gauge     MAX_CONCURRENT                          (Watch)
//	outbound_bulkhead_rejections_total{system}        counter   calls refused by the bulkhead           (Watch)
//	outbound_budget_capped_calls_total{system}        counter   calls whose deadline came from the caller's budget (Watch)
//	outbound_hedges_sent_total{system}                counter   extra copies sent by hedging            (Watch)
//	outbound_hedges_won_total{system}                 counter   hedges whose answer the caller got      (Watch)
//
// The series of every watched system exist from the start, at zero, so
// rate() and absent() work before the first failure.
//
// The event path allocates nothing: the label children of each system
// and outcome are resolved once, when the system is watched or first
// seen, and an event costs a map lookup and a few atomic adds.
package metrics
