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
	busy          float64 // CPU time of this process over the round's wall time
	serverCPU     float64 // the server process's CPU time per call in ns; < 0: not known
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

// window is what runRound reads around the measured window.
type window struct {
	mem    runtime.MemStats
	cpu    time.Duration
	server serverStats
}

// runRound builds a fresh client, warms it up (each worker makes a few
// calls, which also opens the connections), then runs inflight workers for
// d and tallies the round. The server's statistics are read before the
// client is built (connections), before and after the measured window
// (CPU time), always outside it.
func runRound(c client, inflight int, d time.Duration, up *upstream) (result, error) {
	before, err := up.stats()
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

	var w0, w1 window
	if w0.server, err = up.stats(); err != nil {
		return result{}, err
	}
	runtime.GC()
	runtime.ReadMemStats(&w0.mem)
	w0.cpu = processCPU()
	elapsed := measure(call, workers, d)
	w1.cpu = processCPU()
	runtime.ReadMemStats(&w1.mem)
	if w1.server, err = up.stats(); err != nil {
		return result{}, err
	}

	res, first := tally(workers)
	if first != nil {
		fmt.Fprintf(os.Stderr, "  %s: %d errors, the first: %v\n", c.name, res.errors, first)
	}
	if res.calls == 0 {
		return result{}, errors.New("no call finished")
	}
	res.conns = w1.server.conns - before.conns
	res.perCall(elapsed, w0, w1)
	return res, nil
}

// tally adds the workers' counts and latencies up, and returns the first
// error any of them saw.
func tally(workers []worker) (result, error) {
	var res result
	var first error
	var all histogram
	for i := range workers {
		all.merge(&workers[i].hist)
		res.calls += workers[i].calls
		res.errors += workers[i].errors
		if first == nil {
			first = workers[i].first
		}
	}
	res.p50 = all.quantile(0.50)
	res.p99 = all.quantile(0.99)
	return res, first
}

// perCall divides what changed between w0 and w1 by r.calls.
func (r *result) perCall(elapsed time.Duration, w0, w1 window) {
	n := float64(r.calls)
	r.elapsed = elapsed
	r.rps = n / elapsed.Seconds()
	r.allocs = float64(w1.mem.Mallocs-w0.mem.Mallocs) / n
	r.bytes = float64(w1.mem.TotalAlloc-w0.mem.TotalAlloc) / n
	r.cpu = float64(w1.cpu-w0.cpu) / n
	r.busy = float64(w1.cpu-w0.cpu) / float64(elapsed)
	r.serverCPU = -1
	if w0.server.cpu >= 0 && w1.server.cpu >= 0 {
		r.serverCPU = float64(w1.server.cpu-w0.server.cpu) / n
	}
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
// rounds, and the ratios of throughput to raw and to the hand-rolled
// reference, and of CPU per call to the reference's.
func printTable(w io.Writer, o options, cells map[cellKey][]result) {
	fmt.Fprintln(w, "| client | in flight | req/s | vs raw | vs hand-rolled | p50 | p99 | CPU/call | CPU vs hand-rolled | CPU busy | server CPU/call | allocs/call | B/call | conns | errors |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, n := range o.levels {
		raw, ref := cells[cellKey{"raw", n}], cells[cellKey{"hand-rolled", n}]
		for _, c := range o.clients {
			runs := cells[cellKey{c.name, n}]
			errs := 0
			for _, r := range runs {
				errs += r.errors
			}
			med := func(f func(r result) float64) float64 { return median(field(runs, f)) }
			fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %s | %.1fµs | %s | %.0f%% | %s | %.1f | %.0f | %.0f | %d |\n",
				c.name, n, med(rps), ratio(runs, raw, rps), ratio(runs, ref, rps),
				fmtDur(med(func(r result) float64 { return r.p50 })), fmtDur(med(func(r result) float64 { return r.p99 })),
				med(cpu)/1e3, ratio(runs, ref, cpu), 100*med(func(r result) float64 { return r.busy }),
				fmtCPU(med(func(r result) float64 { return r.serverCPU })),
				med(func(r result) float64 { return r.allocs }), med(func(r result) float64 { return r.bytes }),
				med(func(r result) float64 { return float64(r.conns) }), errs)
		}
	}
}

// ratio is the median over the rounds of f(runs) divided by f(ref) in
// the same round, with the lowest and highest of these ratios, or "–"
// without ref.
func ratio(runs, ref []result, f func(result) float64) string {
	if len(ref) != len(runs) || len(runs) == 0 {
		return "–"
	}
	rs := make([]float64, len(runs))
	for i := range runs {
		rs[i] = f(runs[i]) / f(ref[i])
	}
	return fmt.Sprintf("%.2fx (%.2f–%.2f)", median(rs), slices.Min(rs), slices.Max(rs))
}

func rps(r result) float64 { return r.rps }

func cpu(r result) float64 { return r.cpu }

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
	fmt.Fprintf(w, "%s\t%d\t%.1f ns/op\t%.0f req/s\t%.0f p50-ns\t%.0f p99-ns\t%.0f cpu-ns/op\t%.3f cpu-busy",
		name, r.calls, float64(r.elapsed.Nanoseconds())/float64(r.calls), r.rps, r.p50, r.p99, r.cpu, r.busy)
	if r.serverCPU >= 0 {
		fmt.Fprintf(w, "\t%.0f server-cpu-ns/op", r.serverCPU)
	}
	fmt.Fprintf(w, "\t%.1f B/op\t%.2f allocs/op\t%d conns\n", r.bytes, r.allocs, r.conns)
}
