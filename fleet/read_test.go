package fleet

import (
	"testing"
	"time"
)

// FuzzOnMessage: whatever is published on the fleet's channel, applying it
// never panics, and the view it leaves has a version in [0, 2^53) and an
// open time no further than BREAKER_OPEN_TIMEOUT from now.
func FuzzOnMessage(f *testing.F) {
	for _, seed := range []string{
		"payments 3 1 500", "payments 4 0 0", "payments 9223372036854775807 1 -1",
		"payments 9007199254740991 1 1000000000000", "payments 9007199254740992 0 0",
		"payments -1 1 5", "payments 1 2 5", "payments 1 0 5", "payments 1.5 1 5",
		"payments 1 1 -9223372036854775808", "hello 0a1b", "payments", "", "other 1 1 5",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		c := bare(testSettings)
		c.f.circuits[c.name] = c
		before := time.Now()
		c.f.onMessage(payload)
		v := c.view.Load()
		if v.ver < 0 || v.ver > maxVersion {
			t.Fatalf("%q: view version %d", payload, v.ver)
		}
		if v.open && v.until.Sub(before) > c.openTimeout+time.Second {
			t.Fatalf("%q: open until %v from now, past the open timeout %v", payload, v.until.Sub(before), c.openTimeout)
		}
		if !v.open && !v.until.IsZero() {
			t.Fatalf("%q: closed view with an open time", payload)
		}
	})
}

// TestReadStateRejectsWhatNoPodWrites: each value is ignored and counted,
// or taken with its open time cut to the open timeout and counted.
func TestReadStateRejectsWhatNoPodWrites(t *testing.T) {
	t.Parallel()
	open := testSettings.openTimeout.Milliseconds()
	for _, tc := range []struct {
		ver, s, ms int64
		ok         bool
		left       time.Duration
		capped     bool
	}{
		{ver: 3, s: 1, ms: 500, ok: true, left: 500 * time.Millisecond},
		{ver: 3, s: 1, ms: -40, ok: true},
		{ver: 3, s: 0, ms: 0, ok: true},
		{ver: 3, s: 1, ms: open + 1, ok: true, left: testSettings.openTimeout, capped: true},
		{ver: 3, s: 1, ms: 1 << 62, ok: true, left: testSettings.openTimeout, capped: true},
		{ver: maxVersion, s: 0, ms: 0, ok: true},
		{ver: maxVersion + 1, s: 0, ms: 0},
		{ver: -1, s: 0, ms: 0},
		{ver: 3, s: 2, ms: 0},
		{ver: 3, s: -1, ms: 0},
		{ver: 3, s: 0, ms: 5}, // closed has no time left
	} {
		c := bare(testSettings)
		st, ok := c.readState(tc.ver, tc.s, tc.ms)
		rejected, capped := c.f.malformed.Load() == 1, c.f.capped.Load() == 1
		if ok != tc.ok || rejected == tc.ok || capped != tc.capped || (ok && st.left != tc.left) {
			t.Errorf("readState(%d, %d, %d) = %+v %v (rejected %v, capped %v); want ok %v, left %v, capped %v",
				tc.ver, tc.s, tc.ms, st, ok, rejected, capped, tc.ok, tc.left, tc.capped)
		}
	}
}

// TestViewAtTheLastVersionTakesAnyOther: the change after 2^53-1 is
// version 1 (lua/breaker.lua); a view at 2^53-1 takes it, where any other view
// would call it stale.
func TestViewAtTheLastVersionTakesAnyOther(t *testing.T) {
	t.Parallel()
	c := bare(testSettings)
	now := time.Now()
	c.apply(state{ver: maxVersion, open: true, left: time.Second}, now)
	if behind := c.apply(state{ver: 1}, now); behind || c.view.Load().ver != 1 || c.view.Load().open {
		t.Fatalf("after version 2^53-1, version 1 closed: behind %v, view %+v", behind, c.view.Load())
	}
	if behind := c.apply(state{ver: 0}, now); !behind || c.view.Load().ver != 1 {
		t.Errorf("version 0 after 1: behind %v, view %+v; want behind, view kept", behind, c.view.Load())
	}
}
