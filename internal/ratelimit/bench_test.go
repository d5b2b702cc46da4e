package ratelimit

import (
	"context"
	"testing"
)

// BenchmarkTokenAtHand compares the cost of a token at hand at scope
// local and on a fleet's share (one pod's own bucket either way).
func BenchmarkTokenAtHand(b *testing.B) {
	ctx := context.Background()
	r := limited(b, "1000000000/s", 100000)
	b.Run("local", func(b *testing.B) {
		l := NewLocal(r)
		b.ReportAllocs()
		for b.Loop() {
			_ = l.Wait(ctx, 0)
		}
	})
	b.Run("share", func(b *testing.B) {
		s := NewShare(r.String(), "fleet")
		s.SetRate(r.PerSecond(), r.Burst)
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Wait(ctx, 0)
		}
	})
}

// BenchmarkTokenAtHandParallel is BenchmarkTokenAtHand from every
// processor at once: the bucket's lock, and the share's count of what was
// asked, contended.
func BenchmarkTokenAtHandParallel(b *testing.B) {
	ctx := context.Background()
	r := limited(b, "1000000000/s", 100000)
	b.Run("local", func(b *testing.B) {
		l := NewLocal(r)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = l.Wait(ctx, 0)
			}
		})
	})
	b.Run("share", func(b *testing.B) {
		s := NewShare(r.String(), "fleet")
		s.SetRate(r.PerSecond(), r.Burst)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = s.Wait(ctx, 0)
			}
		})
	})
}
