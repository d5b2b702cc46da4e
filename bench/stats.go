package main

import (
	"fmt"
	"math/bits"
	"os"
	"slices"
	"strings"
	"time"
)

// histogram is a log-linear latency histogram: 32 buckets per power of
// two of nanoseconds (about 3% resolution), fixed size, no allocation.
type histogram struct {
	n       uint64
	buckets [64 * subBuckets]uint64
}

const subBits = 5
const subBuckets = 1 << subBits

func bucketOf(ns uint64) int {
	if ns < subBuckets {
		return int(ns)
	}
	e := bits.Len64(ns) - subBits // >= 1
	return e*subBuckets + int((ns>>(e-1))&(subBuckets-1))
}

// bucketMid is the middle of bucket i's range.
func bucketMid(i int) float64 {
	if i < subBuckets {
		return float64(i)
	}
	e, sub := i/subBuckets, i%subBuckets
	lo := uint64(subBuckets+sub) << (e - 1)
	return float64(lo) + float64(uint64(1)<<(e-1))/2
}

func (h *histogram) add(d time.Duration) {
	h.buckets[bucketOf(uint64(max(d, 0)))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	h.n += o.n
	for i := range h.buckets {
		h.buckets[i] += o.buckets[i]
	}
}

func (h *histogram) quantile(q float64) float64 {
	target := uint64(q * float64(h.n))
	var seen uint64
	for i, n := range h.buckets {
		seen += n
		if seen > target {
			return bucketMid(i)
		}
	}
	return 0
}

func field(rs []result, f func(result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtDur(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	}
}

// fmtCPU is a CPU time per call in µs, or "–" when it is not known (< 0).
func fmtCPU(ns float64) string {
	if ns < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1fµs", ns/1e3)
}

// loadAvg is the 1, 5 and 15 minute load averages, which say how much
// else was running on the machine.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpusAllowed is the list of CPUs this process may run on (taskset's
// affinity), as Linux gives it in /proc/self/status.
func cpusAllowed() string {
	return procField("/proc/self/status", "Cpus_allowed_list")
}

func cpuModel() string {
	return procField("/proc/cpuinfo", "model name")
}

// procField is the value of the first "key: value" line of file whose key
// is key, or "unknown".
func procField(file, key string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
