// Package fleet shares a circuit breaker across the pods of a service
// over Redis: the pods trip together, on the evidence of the whole fleet,
// at the speed of a local breaker, and fall back to their local breakers
// when Redis fails.
//
// It plugs into a registry with [Fleet.Option] and applies to the systems
// whose BREAKER_SCOPE is fleet; the others keep their local breaker.
//
//	f, err := fleet.FromEnv(ctx) // OUTBOUND_FLEET_REDIS_URL, OUTBOUND_FLEET_NAMESPACE
//	if err != nil { ... }
//	defer f.Close()
//	reg, err := registry.FromEnvWith(systems, f.Option())
//
// # How it works
//
// Calls decide locally and never talk to Redis: while Redis answers, a
// call reads the fleet's state of its system from one atomic value
// (closed; open until T, this pod's clock; half-open after T), and a
// closed state passes the call to the system's own (local) breaker, whose
// outcome is added to two atomic counters. When Redis does not answer,
// the local breaker alone decides, as at scope local.
//
// One goroutine per Fleet talks to Redis, at most one pipelined round
// trip per tick (Config.FlushInterval, 200ms) or event, each bounded by
// Config.Timeout (100ms):
//
//   - Evidence: each system's counts since the last flush, only when they
//     changed, go into the fleet's window of the system (ten buckets of
//     BREAKER_WINDOW), and the fleet's totals come back. When they break
//     the system's rule (at least BREAKER_MIN_REQUESTS, failure ratio at
//     least BREAKER_FAILURE_RATIO) the fleet opens, even if no pod's
//     breaker would have alone. A pod whose own breaker trips opens the
//     fleet's at once.
//   - State: closed or open until T, with a version. Every change is a Lua
//     script that compares the version (a stale writer can never undo a
//     newer open) and publishes the change, which a second goroutine
//     applies as it arrives; each round trip reads the state back, and
//     with nothing to flush it is read every Config.ReadInterval (1s).
//   - Half-open: after T, a pod that has a call to make takes a lease
//     (SET NX PX, one of BREAKER_HALF_OPEN_PROBES per open version) and
//     sends one probe; the others refuse. A failed probe opens again, the
//     last of HALF_OPEN_PROBES successes closes: at most that many probes
//     run in the whole fleet per round, among the pods in sync. A lease
//     lets its pod start a probe for min(CALL_TIMEOUT,
//     BREAKER_OPEN_TIMEOUT) from when it asked, and lives that plus
//     CALL_TIMEOUT in Redis: it never expires under its probe, and a pod
//     that missed the round's end cannot probe into the next round. A pod
//     that has not heard of an open yet (one message's delivery, about a
//     FlushInterval at worst) still calls as closed.
//   - Redis failing, slow or emptied: round trips that fail for
//     3 x Config.Timeout (one slow round trip on a busy machine is not
//     enough), a command Redis refuses (a user without the rights to run
//     scripts, write or publish: they are checked before the fleet counts
//     itself in sync), or a subscription that breaks, make the fleet
//     degraded (every breaker local) until a round trip succeeds; a state
//     Redis lost (a restart came back empty) is written back from the
//     pods' view. [Fleet.Sync] says which, since when, and the last error
//     (password redacted); Config.Logger is told once per change, and
//     reminded once a minute while degraded. go-redis's own log of failed
//     dials never reaches the standard error.
//
// # What a pod believes
//
// Redis is shared ground: another client may write anything under the
// namespace, and a pod reads what Redis and the channel say as input,
// checked like an environment variable, in Go and in the scripts alike:
//
//   - A version is an integer in [0, 2^53-1] (Lua numbers are doubles);
//     the change after 2^53-1 is version 1, which a view at 2^53-1 takes.
//   - s is 0 (closed) or 1 (open); an open time past now + the system's
//     own BREAKER_OPEN_TIMEOUT is cut to it, in the pod's view and in
//     Redis.
//   - A state of the wrong type or whose fields are not such numbers is
//     garbage: deleted and read as no state (closed, version 0), which
//     the pods then write over. Window fields no pod writes (names, counts
//     that are not numbers, buckets in the future, more failures than
//     requests) are deleted before the window is counted and its expiry
//     set. A lease with no expiry, or one past the pod's lease life, gets
//     the pod's lease life.
//   - Replies and messages of the wrong shape are ignored. Whatever is
//     ignored is counted in Sync.Rejected, whatever is cut in Sync.Capped.
//   - A pod writes back (restore, trip, probe) only a state it accepts
//     itself, and the scripts check what they are given by the same rules.
//
// So whatever another client writes, once the writes stop every pod
// serves a healthy upstream again within BREAKER_OPEN_TIMEOUT +
// Config.ReadInterval (the time to read what was written) and a probe:
// within 2 x BREAKER_OPEN_TIMEOUT when ReadInterval is no longer than
// it. Two exceptions are bounded otherwise: a forged probe lease holds
// its round as a pod that died mid-probe would, for at most its lease
// life; forged counts in the current window weigh on the failure ratio
// until their bucket leaves BREAKER_WINDOW (a pod's own breaker still
// trips the fleet's). The pods of one system should share its settings:
// a pod cuts open times and leases to its own BREAKER_OPEN_TIMEOUT and
// CALL_TIMEOUT.
//
// # What observers see
//
// The registry's observers (metrics' transition counter, the status
// page's "breaker changed at", the log) are told of every change of a
// system's breaker as its Status shows it, whatever caused it: its own
// local breaker, another pod tripping the fleet's, the open time passing
// (half-open, told within a FlushInterval even without calls), a probe
// closing it, Redis failing (the local breaker's state) or coming back.
// Each change is told once on each pod: a pod whose own breaker tripped
// the fleet's is told closed->open once, not twice.
//
// The keys of one system live under outbound:fleet:{<namespace>:<system>}:
// (state, window, probe leases), changes are published on
// outbound:fleet:<namespace>, so two services on one Redis never share a
// breaker. The braces are a hash tag: on Redis Cluster every key of one
// system hashes to one slot, as a script that touches them needs (the
// fleet itself still talks to one Redis: a plain one or a primary). Keys
// of versions before the hash tag (outbound:fleet:<namespace>:<system>:)
// are not read: a fleet that upgrades starts from closed, with an empty
// window, and the old keys expire or can be deleted.
package fleet
