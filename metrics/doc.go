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
//	outbound_calls_total{system,outcome,status_class}    counter calls, by how they ended (observe.CallOutcomes: ok, failed, gave_up, the refusals, ...) and the status class (2xx..5xx, "" without one)
//	outbound_attempts_total{system,outcome,status_class} counter attempts, by how they ended (observe.AttemptOutcomes: ok, failed, retry, gave_up, breaker_open, ...)
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
//	outbound_breaker_forced{system,state}             gauge     1 while an operator forces the breaker  (Watch)
//	outbound_rate_limit_share{system}                 gauge     requests/s this pod may send (RATE_LIMIT) (Watch)
//	outbound_rate_limit_tokens{system}                gauge     requests it may send at once now        (Watch)
//	outbound_rate_limit_paused{system}                gauge     1 while the upstream paused the system  (Watch)
//	outbound_rate_limit_refused_total{system}         counter   requests the rate limit refused         (Watch)
//
// The series of every watched system exist from the start, at zero, so
// rate() and absent() work before the first failure.
//
// The outcomes and the status class are those of package observe, the
// registry's own classification: a 501 the breaker counts is outcome
// failed with status_class 5xx, never ok. The event path allocates
// nothing for the common pairs: the label children of each system,
// outcome and usual status class are resolved once, when the system is
// watched or first seen; a rarer pair (a 1xx) is resolved on first use.
package metrics
