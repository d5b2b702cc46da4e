package stats

import (
	"math"
	"time"
)

// hist is a latency histogram with log-scale buckets 2^(1/8) (~9%) wide
// from 10µs to ~3min, so percentiles cost constant memory however long
// the demo runs. Quantiles report a bucket's upper bound. Not safe for
// concurrent use: System's mutex guards it.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
}

const (
	histBase      = 10 * time.Microsecond
	histPerOctave = 8
	histBuckets   = histPerOctave * 24
)

func (h *hist) add(d time.Duration) {
	i := 0
	if d > histBase {
		i = int(math.Ceil(histPerOctave * math.Log2(float64(d)/float64(histBase))))
	}
	h.counts[min(i, histBuckets-1)]++
	h.n++
}

// quantile returns the q-quantile (0 < q <= 1), or 0 for no samples.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := max(uint64(math.Ceil(q*float64(h.n))), 1)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return time.Duration(float64(histBase) * math.Exp2(float64(i)/histPerOctave))
		}
	}
	return 0
}
