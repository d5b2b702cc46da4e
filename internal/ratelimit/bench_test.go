package ratelimit

import (
	"context"
	"testing"
)

// BenchmarkTokenAtHand is the cost of a token at hand at scope local
// (module fleet's share has the same benchmark beside it).
func BenchmarkTokenAtHand(b *testing.B) {
	ctx := context.Background()
	l := NewLocal(limited(b, "1000000000/s", 100000))
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Wait(ctx, 0)
	}
}

// BenchmarkTokenAtHandParallel is BenchmarkTokenAtHand from every
// processor at once: the bucket's lock contended.
func BenchmarkTokenAtHandParallel(b *testing.B) {
	ctx := context.Background()
	l := NewLocal(limited(b, "1000000000/s", 100000))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = l.Wait(ctx, 0)
		}
	})
}
