package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// result is one round of one client.
type result struct {
	calls         int
	elapsed       time.Duration
	rps, p50, p99 float64 // p50, p99 in ns
	allocs, bytes float64 // per call
	cpu           float64 // CPU time of this process per call, in ns
	conns         int64
	errors        int
}

// worker is one goroutine's tally, allocated before the round so that
// measuring allocates nothing.
type worker struct {
	hist   histogram
	calls  int
	errors int
	first  error
	_      [64]byte // keep workers' counters on separate cache lines
}

// runRound builds a fresh client, warms it up (each worker makes a few
// calls, which also opens the connections), then runs inflight workers for
// d and tallies the round. The server's connection count is read before
// the client is built and after the round, outside the measured window.
func runRound(c client, inflight int, d time.Duration, up *upstream) (result, error) {
	conns0, err := up.conns()
	if err != nil {
		return result{}, err
	}
	call, cleanup, err := c.setup(up.url, inflight)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	workers := make([]worker, inflight)
	if err := warmUp(call, workers); err != nil {
		return result{}, err
	}

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := processCPU()
	elapsed := measure(call, workers, d)
	cpu := processCPU() - cpu0
	runtime.ReadMemStats(&m1)
	conns1, err := up.conns()
	if err != nil {
		return result{}, err
	}

	var all histogram
	res := result{elapsed: elapsed, conns: conns1 - conns0}
	var first error
	for i := range workers {
		all.merge(&workers[i].hist)
		res.calls += workers[i].calls
		res.errors += workers[i].errors
		if first == nil {
			first = workers[i].first
		}
	}
	if first != nil {
		fmt.Fprintf(os.Stderr, "  %s: %d errors, the first: %v\n", c.name, res.errors, first)
	}
	if res.calls == 0 {
		return result{}, errors.New("no call finished")
	}
	res.rps = float64(res.calls) / elapsed.Seconds()
	res.p50 = all.quantile(0.50)
	res.p99 = all.quantile(0.99)
	res.allocs = float64(m1.Mallocs-m0.Mallocs) / float64(res.calls)
	res.bytes = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(res.calls)
	res.cpu = float64(cpu.Nanoseconds()) / float64(res.calls)
	return res, nil
}

// warmUp makes 20 calls from each worker and fails on the first error.
func warmUp(call func() error, workers []worker) error {
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for range 20 {
				if err := call(); err != nil && workers[i].first == nil {
					workers[i].first = err
				}
			}
		})
	}
	wg.Wait()
	for i := range workers {
		if err := workers[i].first; err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// measure runs one goroutine per worker, each making calls back to back
// until d has passed, and returns the time they took.
func measure(call func() error, workers []worker, d time.Duration) time.Duration {
	var wg sync.WaitGroup
	var stop atomic.Bool
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	t0 := time.Now()
	for i := range workers {
		w := &workers[i]
		wg.Go(func() {
			for !stop.Load() {
				s := time.Now()
				err := call()
				w.hist.add(time.Since(s))
				w.calls++
				if err != nil {
					w.errors++
					if w.first == nil {
						w.first = err
					}
				}
			}
		})
	}
	wg.Wait()
	return time.Since(t0)
}

// printHeader says what ran where: Go, the CPUs, where the server was
// and so whose allocations are counted, the load.
func printHeader(w io.Writer, o options, up *upstream) {
	fmt.Fprintf(w, "# outbound peer comparison\n\n")
	fmt.Fprintf(w, "%s, %s/%s, GOMAXPROCS=%d, NumCPU=%d, CPUs allowed: %s, CPU: %s\n", runtime.Version(),
		runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU(), cpusAllowed(), cpuModel())
	if up.remote {
		fmt.Fprintf(w, "server in another process (%s): CPU/call, allocs/call and B/call are this client process's alone\n", up.url)
	} else {
		fmt.Fprintf(w, "server in this process: CPU/call, allocs/call and B/call are client and server together\n")
	}
	fmt.Fprintf(w, "loopback HTTP/1.1 GET, %d-byte body read and closed; %d rounds of %v per cell, interleaved; medians\n",
		len(body), o.rounds, o.duration)
	fmt.Fprintf(w, "load average at start: %s\n\n", loadAvg())
}

// printTable prints one row per client and level: medians over the
// rounds, and the ratios to raw and to the hand-rolled reference.
func printTable(w io.Writer, o options, cells map[cellKey][]result) {
	fmt.Fprintln(w, "| client | in flight | req/s | vs raw | vs hand-rolled | p50 | p99 | CPU/call | allocs/call | B/call | conns | errors |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, n := range o.levels {
		raw, ref := cells[cellKey{"raw", n}], cells[cellKey{"hand-rolled", n}]
		for _, c := range o.clients {
			runs := cells[cellKey{c.name, n}]
			errs := 0
			for _, r := range runs {
				errs += r.errors
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %s | %.1fµs | %.1f | %.0f | %.0f | %d |\n", c.name, n,
				median(field(runs, func(r result) float64 { return r.rps })), ratio(runs, raw), ratio(runs, ref),
				fmtDur(median(field(runs, func(r result) float64 { return r.p50 }))),
				fmtDur(median(field(runs, func(r result) float64 { return r.p99 }))),
				median(field(runs, func(r result) float64 { return r.cpu }))/1e3,
				median(field(runs, func(r result) float64 { return r.allocs })),
				median(field(runs, func(r result) float64 { return r.bytes })),
				median(field(runs, func(r result) float64 { return float64(r.conns) })), errs)
		}
	}
}

// ratio is the median over the rounds of runs' throughput divided by
// ref's in the same round, with the lowest and highest of these ratios,
// or "–" without ref.
func ratio(runs, ref []result) string {
	if len(ref) != len(runs) || len(runs) == 0 {
		return "–"
	}
	rs := make([]float64, len(runs))
	for i := range runs {
		rs[i] = runs[i].rps / ref[i].rps
	}
	return fmt.Sprintf("%.2fx (%.2f–%.2f)", median(rs), slices.Min(rs), slices.Max(rs))
}

// writeBenchHeader writes the configuration lines of Go's benchmark
// format, and the load average as a line that benchstat ignores.
func writeBenchHeader(w io.Writer, up *upstream) {
	server := "in-process"
	if up.remote {
		server = "separate-process"
	}
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\npkg: github.com/outbound-go/outbound/bench\ncpu: %s\n",
		runtime.GOOS, runtime.GOARCH, cpuModel())
	fmt.Fprintf(w, "go: %s\ncpus-allowed: %s\nserver: %s\n", runtime.Version(), cpusAllowed(), server)
	// Not a configuration line ("key: value", key without spaces): a value
	// that differs between runs would keep benchstat from comparing them.
	fmt.Fprintf(w, "load average at start: %s\n", loadAvg())
}

// writeBenchLine writes one round as one benchmark result, named
// BenchmarkPeer/client=NAME/inflight=N, so that benchstat can compare
// runs round by round.
func writeBenchLine(w io.Writer, k cellKey, r result) {
	name := fmt.Sprintf("BenchmarkPeer/client=%s/inflight=%d", k.client, k.inflight)
	if p := runtime.GOMAXPROCS(0); p > 1 {
		name += fmt.Sprintf("-%d", p)
	}
	fmt.Fprintf(w, "%s\t%d\t%.1f ns/op\t%.0f req/s\t%.0f p50-ns\t%.0f p99-ns\t%.0f cpu-ns/op\t%.1f B/op\t%.2f allocs/op\t%d conns\n",
		name, r.calls, float64(r.elapsed.Nanoseconds())/float64(r.calls), r.rps, r.p50, r.p99, r.cpu, r.bytes, r.allocs, r.conns)
}
