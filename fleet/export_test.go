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
