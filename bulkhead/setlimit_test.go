package bulkhead_test

import (
	"testing"

	"github.com/outbound-go/outbound/bulkhead"
)

// Lowering the limit below the permits in flight fails none of them and
// admits no call until fewer than the new limit are in flight; raising it
// again admits at once.
func TestSetLimitBelowInFlightAdmitsNoneUntilEnoughReturn(t *testing.T) {
	b, err := bulkhead.New(8, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		if !b.TryAcquire() {
			t.Fatal("a free permit refused")
		}
	}
	if err := b.SetLimit(2); err != nil {
		t.Fatal(err)
	}
	if b.Limit() != 2 || b.InFlight() != 8 {
		t.Fatalf("limit %d, in flight %d; want 2 and the 8 calls kept", b.Limit(), b.InFlight())
	}
	for i := range 6 {
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
		if b.TryAcquire() {
			t.Fatalf("admitted with %d in flight, limit 2", 8-i-1)
		}
	}
	if err := b.Release(); err != nil { // 1 in flight
		t.Fatal(err)
	}
	admitted := func(n int) int { // how many of n tries are admitted
		got := 0
		for range n {
			if b.TryAcquire() {
				got++
			}
		}
		return got
	}
	if got := admitted(2); got != 1 {
		t.Fatalf("with 1 in flight and limit 2: %d more admitted, want exactly 1", got)
	}
	if err := b.SetLimit(4); err != nil {
		t.Fatal(err)
	}
	if got := admitted(3); got != 2 {
		t.Fatalf("limit 4 with 2 in flight: %d more admitted, want exactly 2 (in flight %d)", got, b.InFlight())
	}
	for range 4 {
		_ = b.Release()
	}
	if err := b.SetLimit(9); err == nil {
		t.Error("a limit above the capacity was taken")
	}
	a, _ := bulkhead.NewAdaptive(1, 4, 0)
	if err := a.SetLimit(2); err == nil {
		t.Error("SetLimit on an adaptive bulkhead was taken")
	}
}
