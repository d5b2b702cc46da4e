// Package hedge decides when a hedged attempt gets its next copy
// (HEDGE_DELAY, HEDGE_MAX): after a fixed delay, or after a percentile of
// the system's recent response times kept between HEDGE_DELAY_MIN and
// HEDGE_DELAY_MAX. It is internal: the registry's hedge stage sends the
// copies; docs/hedging.md documents hedging.
package hedge

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
)

// The percentile delay is computed over the last hedgeWindow answers, once
// hedgeMinSamples have come in and again every hedgeRecompute answers.
const (
	hedgeWindow     = 256
	hedgeMinSamples = 20
	hedgeRecompute  = 16
)

// Policy is one system's hedging policy: how many copies, and when. A
// fixed HEDGE_DELAY is the delay; a percentile is computed from the
// response times of the system's recent attempts (every copy that got
// response headers; a copy cancelled because another won is not counted)
// and kept between HEDGE_DELAY_MIN and HEDGE_DELAY_MAX (or READ_TIMEOUT,
// if sooner). Until hedgeMinSamples answers have come in, the delay is
// the ceiling. A hedger is safe for concurrent use.
type Policy struct {
	max        int // copies beside one attempt, at most
	fixed      time.Duration
	percentile float64 // 0 for a fixed delay
	floor, top time.Duration

	mu      sync.Mutex
	window  [hedgeWindow]time.Duration
	n       uint64
	current atomic.Int64 // the percentile delay, clamped
}

// New returns the system's hedging policy, or nil when it does not hedge
// (HEDGE_DELAY=0). c was validated: HEDGE_DELAY parses.
func New(c config.Client) *Policy {
	fixed, pct, err := config.ParseHedgeDelay(c.HedgeDelay)
	if err != nil || (fixed == 0 && pct == 0) {
		return nil
	}
	h := &Policy{max: c.HedgeMax, fixed: fixed, percentile: pct,
		floor: c.HedgeDelayMin, top: min(c.HedgeDelayMax, c.ReadTimeout)}
	h.floor = min(h.floor, h.top)
	h.current.Store(int64(h.top))
	return h
}

// Delay is how long a copy waits for an answer before the next one goes.
func (h *Policy) Delay() time.Duration {
	if h.fixed > 0 {
		return h.fixed
	}
	return time.Duration(h.current.Load())
}

// Record notes the response time of a copy that got response headers,
// for a percentile delay; a copy with no response (answered false) is not
// counted.
func (h *Policy) Record(answered bool, took time.Duration) {
	if h.percentile == 0 || !answered {
		return
	}
	h.mu.Lock()
	h.window[h.n%hedgeWindow] = took
	h.n++
	if h.n >= hedgeMinSamples && (h.n == hedgeMinSamples || h.n%hedgeRecompute == 0) {
		h.current.Store(int64(h.percentileLocked()))
	}
	h.mu.Unlock()
}

// percentileLocked is the nearest-rank percentile of the window,
// clamped to the floor and the ceiling.
func (h *Policy) percentileLocked() time.Duration {
	s := slices.Clone(h.window[:min(h.n, hedgeWindow)])
	slices.Sort(s)
	rank := int(math.Ceil(h.percentile / 100 * float64(len(s))))
	return min(max(s[max(rank, 1)-1], h.floor), h.top)
}

// Max is the number of copies at most sent beside one attempt.
func (h *Policy) Max() int { return h.max }
