package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond every 5 ms until it holds, failing the test with
// what if it still does not after d. It waits for state that arrives
// asynchronously (a goroutine's effect, a server's count); it never
// judges how long that took, so d is a generous bound, not a target.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v", what, d)
		}
	}
}
