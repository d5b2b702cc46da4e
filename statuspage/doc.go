// Package statuspage serves a live HTML status page of a registry's
// systems: breaker state, calls in flight against the bulkhead's
// capacity, counters, retries, rejections, recent latency percentiles,
// the last error and the effective configuration (redacted).
//
//	rec := statuspage.NewRecorder()
//	reg, err := registry.FromEnvWith(nil, registry.WithObserver(rec))
//	if err != nil { ... }
//	defer reg.Close()
//	admin.Handle("/debug/outbound/", http.StripPrefix("/debug/outbound", statuspage.Handler(reg, rec)))
//
// The page is one self-contained HTML file embedded in the binary:
// inline CSS and JavaScript, no CDN, no build step, a strict
// Content-Security-Policy. It polls status.json, served by the same
// handler next to it, every second and updates in place, so a breaker
// that opens turns red without a reload. Both URLs are relative: mount
// the handler under any prefix.
//
// The [Recorder] is the observer that supplies what Status cannot: the
// durations of the last [RingSize] calls of each system (for p50, p90,
// p99 and max), when the breaker last changed state, and the last
// failure.
package statuspage
