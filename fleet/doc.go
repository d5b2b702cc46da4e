// Package fleet shares a circuit breaker and a rate limit across the pods
// of a service over Redis: the pods trip together, on the evidence of the
// whole fleet, and stay under one quota of requests together, at the
// speed of a local breaker and a local token bucket; they fall back to
// deciding alone when Redis fails.
//
// It plugs into a registry with [Fleet.Option] and applies to the systems
// whose BREAKER_SCOPE or RATE_SCOPE is fleet; the others keep their local
// breaker and quota.
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
//     BREAKER_WINDOW). The window is read back, and the fleet's totals
//     judged, when the counts hold failures (as a breaker judges its
//     counts at a failure), when they open a bucket, and when this pod's
//     totals are half a window old; requests alone go in with one
//     command. When the totals break the system's rule (at least
//     BREAKER_MIN_REQUESTS, failure ratio at least
//     BREAKER_FAILURE_RATIO) the fleet opens, even if no pod's breaker
//     would have alone. A pod whose own breaker trips opens the fleet's
//     at once.
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
//     (password redacted); the fleet's logger is told once per change,
//     and reminded once a minute while degraded: Config.Logger, or else
//     the logger of the registry it serves (registry.WithLogger, handed
//     over in registry.FleetSystem), so a service wires one logger. go-redis's own log of failed
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
//     requests) are deleted when the window is read (before it is
//     counted), and a window larger than any the pods write is deleted
//     whole. A lease with no expiry, or one past the pod's lease life, gets
//     the pod's lease life.
//   - Replies and messages of the wrong shape are ignored. Whatever is
//     ignored is counted in Sync.Malformed, whatever is cut in Sync.Capped.
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
// # The quota (RATE_SCOPE=fleet)
//
// RATE_LIMIT is the fleet's: every request that leaves for the upstream
// (first attempts, retries, hedges, probes) takes a token from the pod's
// share of it, a local token bucket whose rate is the share and whose
// burst is the fleet's burst (RATE_BURST) in the share's proportion, at
// least 1. A request never talks to Redis; the loop's round trip carries,
// for each such system, one script call per tick that grants the share:
//
//   - The pod says what it wants: 1.25 x the requests that asked for a
//     token over the last second, plus those waiting now per tick, at
//     most the limit; and the rate it may still send at (its rate now).
//   - Redis grants it its max-min fair share of the limit over the wants
//     of the live pods: each pod gets what it wants up to an equal split
//     of what the others leave, and when every pod has what it wants the
//     rest is split evenly, lifting a pod up to an even split of the
//     limit at most (an idle fleet holds limit / pods each; a pod holds
//     more only for a demand of its own, and no more than it). The
//     grant is cut to what the other pods do not hold: a pod holds the
//     larger of its grant and the rate it said it may still send at, so a
//     share moves only once the pod giving it up has applied its cut.
//     Moving a share takes about three ticks (measured: 0.5-0.7s).
//   - A grant holds for a grant life, max(4 x tick, ReadInterval) +
//     Timeout (1.1s at the tick of up to 50 pods), from when the pod asked;
//     its entry in Redis expires then too. A dead pod's share comes back
//     by itself within a grant life; a pod that closes gives it back at
//     once ([Fleet.Close]).
//
// The bound. In sync, the rates of the pods never sum above the limit L
// (each pod sends at a rate Redis holds for it, and the holds sum to at
// most L), and a token bucket sends in any window w at most its burst
// plus its rate over w; a new rate binds from the moment it is set (no
// token is reserved ahead but the next one, which a new rate cancels). So
// the pods together send in any window w at most
//
//	L x w + B + k
//
// where B is the fleet's burst and k the number of pods whose share is
// below L / B (their bucket is rounded up to one token): with 200/s and
// its derived burst of 10 over 10 busy pods, at most 210 in any second
// (measured at the upstream: at most 203 in a 1s window; the pods' sends
// in any sliding second, 207-210). The bucket of a pod starts full at its
// first rate (the first request after a start goes at once, as at scope
// local), which the bound counts.
//
// When Redis fails, the quota keeps a bound of its own:
//
//   - Every pod cut off (Redis down): a pod keeps its grant until it
//     expires, then takes limit / pods (the pods it last saw), but no more
//     than its grant until every other pod's grant has expired too (the
//     others' grants end at most Timeout + a grant life after this pod's
//     first failed round trip was sent). The pods' rates never sum above
//     L when they last saw the same number of pods. Measured: Redis killed
//     for 4s under 10 busy pods, every 1s window at the upstream 190-203;
//     one pod holding most of the limit when Redis died, its sliding
//     seconds at most 207.
//   - Some pods cut off while others reach Redis (a partition): the others
//     take the cut-off pods' shares once they expire, and each cut-off pod
//     sends limit / pods: at most L / pods over per cut-off pod.
//   - A pod that never reached Redis (started during an outage) knows no
//     other pod: it sends at the whole limit, as at scope local, until
//     Redis answers.
//   - Back in sync, or when Redis lost the shares between two ticks
//     (restarted empty, failed over, the hash deleted): a pod that was
//     sending takes at most limit / pods for a grant life and a tick,
//     while the others come back; measured: every share from Redis again
//     33-77ms after Redis came back.
//
// A round trip that fails changes nothing until the grant expires; Sync
// and the registry's Status say whether the share comes from Redis
// and the fleet is in sync (RateStatus.Synced, false with Sync's cause
// in RateStatus.LastError whenever Sync says not synced). Costs: at most one op per system per pod per tick,
// inside the tick's one script call, whatever the request rate
// (measured: 100,000 requests from 10 pods cost as many commands as
// 1,000).
//
// # The upstream's word
//
// A 429 or 503 with Retry-After, or rate-limit headers that say nothing
// is left, that reaches one pod pauses that pod's share at once
// (registry.SharedQuota.Pause, bounded by its CALL_TIMEOUT and
// maxPause) and wakes the loop, which sets <base>:pause for the
// pause left (PX, unless a longer pause is there) and publishes it: every
// pod pauses on the message, and reads the key on every tick (a lost
// message, a pod that starts during the pause). A pod takes a pause read
// from Redis or the channel for at most its own CALL_TIMEOUT and
// maxPause. A burst of 429s is one pause and one message, and
// every pod's observers (its log) are told of it once.
// Measured: a 429 with Retry-After: 2 on one of 5 pods, the upstream saw
// nothing from 0-2ms after it until 2.001-2.002s after it.
//
// # An operator's override
//
// A system's breaker at scope fleet takes an operator's override
// (registry.SharedBreaker.Force): an operator's Force (registry.Client.Force, or [Force] from the command
// line without a registry) writes <base>:force, the state open or closed
// with the time left as its expiry (at most 24 hours: it ends by itself,
// and survives a pod's restart), and publishes it; every pod applies the
// message at once and reads the key with the periodic read of every
// state (every ReadInterval, or two ticks in a large fleet). Forced, on every call's path, is one atomic load. A
// pod keeps the last override it knew while Redis fails, until it ends.
// Every pod's observers (its log, its forced metric) are told of an
// override it learns of from elsewhere, once per change.
// Measured: forced open on one pod, on all 5 within 1-4ms; read by a
// pod started afterwards within 0.2ms; released on all within 3ms; read
// within 1.2s when its message is lost.
//
// # What a pod believes of the quota and the override
//
// The same rules as for the breaker hold: an entry of the quota's hash
// that is not four whole numbers, a key of the wrong type, a pause with
// no expiry, an override that is not open or closed, a message of the
// wrong shape are ignored, deleted where they lie, and counted in
// Sync.Malformed; a want, grant or hold above the limit, an entry that
// lives past a grant life, a pause past the pod's CALL_TIMEOUT, an
// override past 24 hours are cut to them, in Redis too, and counted in
// Sync.Capped. A forged pod holding the whole limit holds it for at most
// a grant life after the last write.
//
// What a pod reads is bounded too: a state or a window larger than any
// the fleet writes (more than one HSCAN of 64 returns), or a quota's hash
// of more fields than four per pod the pod knows of and 1,024, is
// deleted whole (UNLINK) and counted in Sync.Malformed, never read and
// deleted field by field (measured: 300,000 garbage fields in a quota's
// hash, no script call of the pods in SLOWLOG past 50 ms, the limit
// shared again within a tick).
//
// The fleet's totals (what the pods hold, read on most ticks instead of
// every entry) are input too: another client may rewrite them to read
// fresh and say that nobody else holds anything. The totals alone never
// grant a pod more than an even split of the limit (limit / pods, the
// pods counted as the larger of the totals' count and the entries in the
// hash); a pod that wants more is granted it only by a count of every
// entry, and while it holds more it counts on each of its ticks, so that
// what the others took from forged totals meanwhile is taken back within
// a tick. Under forged totals the pods send at most the bound above plus
// one tick and a round trip (FlushInterval + Timeout) of an even split
// for each pod below one (measured: 2 pods at 100/s, totals forged every
// 5 ms for 3 s, at most 104 in any second). Totals that hold less than
// the pod's own entry, or than a count of the entries finds, are counted
// in Sync.Malformed.
//
// # Keys, Redis Cluster and cost
//
// The keys of one system live under outbound:fleet:{<namespace>:<system>}:
// (state, window, probe leases, quota, pause, override), changes are
// published on outbound:fleet:<namespace>, so two services on one Redis
// never share a breaker or a quota. The braces are a hash tag: on a Redis
// Cluster (a URL with cluster=true, config.Fleet.Cluster) every key of one
// system hashes to one slot, as a script that touches them needs. Keys of
// versions before the hash tag (outbound:fleet:<namespace>:<system>:) are
// not read: a fleet that upgrades starts from closed, with an empty
// window, and the old keys expire or can be deleted.
//
// A round trip is one pipeline, whatever the number of systems: per Redis
// master, calls of the batch script of at most 8 ops each (batch.go), so
// that no call holds Redis long; a system with nothing to say is left
// out.
// The tick follows the fleet's size (pace.go): FlushInterval up to 50
// pods, growing with the pods to FlushInterval x 10 at 500, so that the
// fleet's round trips stay about 250 a second. Measured
// (BenchmarkRedisCost, 5 and 20 busy pods x 50 systems ticking as in a
// fleet of 1,000, on a 2-core machine): a script call runs about 28
// commands inside Redis and takes 0.1-0.15 ms on average; each pod adds
// 0.55-0.85 ms of Redis CPU a second above the idle server and the
// other pods' presence, so 1,000 pods fit in one Redis core.
// docs/fleet-redis.md has the figures, the rights a Redis user needs and
// the failure modes.
package fleet
