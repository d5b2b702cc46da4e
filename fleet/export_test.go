package fleet

import "time"

// OpsPerCall is opsPerCall, for the tests of the package's users.
const OpsPerCall = opsPerCall

// Reads is how many round trips of f have read every state back (the
// periodic read, Config.ReadInterval), for tests that judge what a pod
// read rather than how long it took.
func (f *Fleet) Reads() uint64 { return f.reads.Load() }

// Tick is the loop's tick now, chosen from the pods f last counted.
func (f *Fleet) Tick() time.Duration { return f.tick() }

// Seen is what f's breaker of one system held at a moment: whether the
// fleet was in sync, and the fleet's state as the pod knew it (the open
// version, and when it turns half-open). Two Seen are equal only when
// the pod held the same view (not merely an equal one) and the same sync.
type Seen struct {
	Synced bool
	Ver    int64
	Open   bool
	Until  time.Time
	v      *view
}

// Seen is what f's breaker of system holds now.
func (f *Fleet) Seen(system string) Seen {
	f.mu.Lock()
	c := f.circuits[system]
	f.mu.Unlock()
	synced, v := f.synced.Load(), c.view.Load()
	return Seen{Synced: synced, Ver: v.ver, Open: v.open, Until: v.until, v: v}
}

// HalfOpen reports whether s is a half-open view at now, in sync.
func (s Seen) HalfOpen(now time.Time) bool { return s.Synced && s.Open && !now.Before(s.Until) }

// Granted reports whether the rate of f's quota of system is a grant
// from Redis in force now (not its fallback, limit / pods last seen).
func (f *Fleet) Granted(system string) bool {
	f.mu.Lock()
	q := f.quotas[system]
	f.mu.Unlock()
	return q != nil && q.synced.Load()
}
