package fleet

import (
	"testing"
	"time"
)

// TestDemandAtALongTickIsTheRateOfItsCount: a pod counts its requests
// once a tick. At a tick of 2s (a fleet of 500 pods or more) one count
// holds 2s of requests, and the rate is that count over 2s, not over the
// second it is asked for; at a tick of 200ms, the counts of the last
// second.
func TestDemandAtALongTickIsTheRateOfItsCount(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var long demand
	long.start(t0, 200*time.Millisecond)
	for i := range 5 {
		long.add(t0.Add(time.Duration(i+1)*2*time.Second), 40) // 20/s
		if got := long.perSec(); got != 20 {
			t.Fatalf("tick 2s, count %d of 40: %.2f/s, want 20", i+1, got)
		}
	}
	var short demand
	short.start(t0, 200*time.Millisecond)
	for i := range 20 {
		n := uint64(4) // 20/s
		if i >= 15 {
			n = 10 // 50/s for the last second
		}
		short.add(t0.Add(time.Duration(i+1)*200*time.Millisecond), n)
	}
	if got := short.perSec(); got != 50 {
		t.Errorf("tick 200ms: %.2f/s over the last second, want 50", got)
	}
	var woken demand // a loop woken 1ms after it started: the span is a tick at least
	woken.start(t0, 200*time.Millisecond)
	woken.add(t0.Add(time.Millisecond), 2)
	if got := woken.perSec(); got != 10 {
		t.Errorf("2 requests 1ms after the start: %.2f/s, want 10 (over 200ms)", got)
	}
}

// TestQuotaAsksWhenItChangesAShare: a pod granted an even split of a
// limit far above its want does not ask again for a want that moved
// within an eighth of its grant, nor for a rate that rose or fell a
// little; it asks for a want that moved by more, for a cut of more than
// an eighth (another pod may wait for it), and, held by the fair level
// (its grant under its want), for a move of an eighth of its want.
func TestQuotaAsksWhenItChangesAShare(t *testing.T) {
	now := time.Unix(1000, 0)
	const limit, pods = 100_000e6, 5
	even := int64(limit / pods)
	q := &quota{limit: limit, sentLimit: limit, pods: pods, life: 8 * time.Second,
		grant: even, leaseEnd: now.Add(7 * time.Second), sentWant: 25e6, sentAck: even}
	for _, c := range []struct {
		what      string
		want, ack int64
		due       bool
	}{
		{"want 25 -> 40, rate as it was", 40e6, even, false},
		{"want 25 -> 10", 10e6, even, false},
		{"rate cut by a thousandth", 25e6, even - even/1000, false},
		{"rate raised", 25e6, even + 1e6, false},
		{"want 25 -> 3,000 (above an eighth of the grant)", 3000e6, even, true},
		{"want 25 -> 0", 0, even, true},
		{"rate cut by a quarter", 25e6, even * 3 / 4, true},
	} {
		if got := q.due(now, c.want, c.ack); got != c.due {
			t.Errorf("%s: due %v, want %v", c.what, got, c.due)
		}
	}
	held := &quota{limit: limit, sentLimit: limit, pods: pods, life: 8 * time.Second,
		grant: 50e6, leaseEnd: now.Add(7 * time.Second), sentWant: 100e6, sentAck: 50e6}
	if !held.due(now, 115e6, 50e6) {
		t.Error("a pod held under its want of 100 by the fair level, wanting 115: not due, want due")
	}
	if held.due(now, 110e6, 50e6) {
		t.Error("a pod held under its want of 100, wanting 110: due, want not (within an eighth)")
	}
	q.leaseEnd = now.Add(3 * time.Second)
	if !q.due(now, 25e6, even) {
		t.Error("a grant with less than half its life left: not due, want due")
	}
}
