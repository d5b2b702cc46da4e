package registry

import (
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
)

// TestPercentileDelayIsTheCeilingUntilTwentyAnswers checks that a percentile HEDGE_DELAY is the ceiling
// until 20 copies have answered, then the nearest-rank percentile of the
// last 256 answers, kept between HEDGE_DELAY_MIN and HEDGE_DELAY_MAX
// (READ_TIMEOUT, if sooner); a copy with no response is not counted.
func TestPercentileDelayIsTheCeilingUntilTwentyAnswers(t *testing.T) {
	t.Parallel()
	base := config.Baseline()
	base.HedgeDelay = "p95"
	feed := func(h *hedgePolicy, n int, took func(i int) time.Duration) {
		for i := range n {
			h.record(true, took(i))
		}
	}
	ms := func(i int) time.Duration { return time.Duration(i) * time.Millisecond }

	h := newHedgePolicy(base)
	if d := h.delay(); d != time.Second {
		t.Errorf("cold start: delay %v, want the ceiling 1s", d)
	}
	feed(h, 19, ms)
	h.record(false, time.Hour) // no response: not counted
	if d := h.delay(); d != time.Second {
		t.Errorf("19 answers: delay %v, want the ceiling 1s", d)
	}
	feed(h, 1, ms)
	if d := h.delay(); d != 17*time.Millisecond { // rank ceil(0.95*20) = 19 of 0, 0, 1..18
		t.Errorf("20 answers 0..18ms and 0: delay %v, want 17ms", d)
	}
	h = newHedgePolicy(base)
	feed(h, 256, func(i int) time.Duration { return ms(i%100 + 1) }) // 1..100ms, the last 56 1..56
	if d := h.delay(); d != 94*time.Millisecond {
		t.Errorf("window of 1..100ms and 1..56ms: delay %v, want p95 = 94ms", d)
	}
	h = newHedgePolicy(base)
	feed(h, 64, func(int) time.Duration { return time.Microsecond })
	if d := h.delay(); d != 5*time.Millisecond {
		t.Errorf("fast answers: delay %v, want the floor 5ms", d)
	}
	feed(h, 256, func(int) time.Duration { return time.Minute })
	if d := h.delay(); d != time.Second {
		t.Errorf("an outage: delay %v, want the ceiling 1s", d)
	}
	base.ReadTimeout = 300 * time.Millisecond
	if d := newHedgePolicy(base).delay(); d != 300*time.Millisecond {
		t.Errorf("READ_TIMEOUT 300ms: cold delay %v, want 300ms", d)
	}
	base.HedgeDelay = "0"
	if newHedgePolicy(base) != nil {
		t.Error("HEDGE_DELAY=0 built a hedger")
	}
}
