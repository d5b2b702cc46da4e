package main

// The hedging comparison, run with
//
//	cd bench && go run . -hedge
//
// One loopback upstream answers every 20th request (counted on arrival)
// after 500ms and the others after 5ms, a 64-byte body. Each contender
// makes the same calls from the same number of workers, with a fresh
// client: outbound without hedging, with HEDGE_DELAY=20ms and =p95, and
// failsafe-go's hedgepolicy with a 20ms delay and with its p95 quantile
// delay, through failsafehttp over the same tuned transport. The table
// gives p50 and p99 of the calls, the upstream's requests beyond one per
// call, and heap allocations per call (runtime.MemStats, client and
// server together).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

const (
	tailEvery = 20
	tailFast  = 5 * time.Millisecond
	tailSlow  = 500 * time.Millisecond
)

// tailServer is the upstream: every tailEvery-th request slow.
type tailServer struct {
	srv  *http.Server
	url  string
	reqs atomic.Int64
}

func startTailServer() (*tailServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &tailServer{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := tailFast
		if s.reqs.Add(1)%tailEvery == 0 {
			d = tailSlow
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// hedger is one contender of the hedging comparison.
type hedger struct {
	name  string
	setup func(url string) (call func() error, cleanup func(), err error)
}

var hedgers = []hedger{
	{"outbound off", outboundHedged("0")},
	{"outbound 20ms", outboundHedged("20ms")},
	{"outbound p95", outboundHedged("p95")},
	{"failsafe-go 20ms", failsafeHedged(hedgepolicy.NewWithDelay[*http.Response](20 * time.Millisecond))},
	{"failsafe-go p95", failsafeHedged(hedgepolicy.NewWithDelayQuantile[*http.Response](0.95, 256, 20))},
}

// outboundHedged: a registry of one system with the baseline settings,
// MAX_CONCURRENT 64 and HEDGE_DELAY=delay.
func outboundHedged(delay string) func(string) (func() error, func(), error) {
	return func(url string) (func() error, func(), error) {
		loaded, err := config.LoadEnv(map[string]string{config.SystemsVar: "bench", "BENCH_BASE_URL": url,
			"BENCH_MAX_CONCURRENT": strconv.Itoa(poolSize), "BENCH_HEDGE_DELAY": delay})
		if err != nil {
			return nil, nil, err
		}
		r, err := registry.New(loaded)
		if err != nil {
			return nil, nil, err
		}
		call, stop := registryCall(r, url)
		return call, stop, nil
	}
}

// failsafeHedged: failsafehttp's round tripper with hp alone over the
// tuned transport, Timeout = CALL_TIMEOUT.
func failsafeHedged(hp hedgepolicy.HedgePolicy[*http.Response]) func(string) (func() error, func(), error) {
	return func(url string) (func() error, func(), error) {
		t := transport()
		c := &http.Client{Transport: failsafehttp.NewRoundTripper(t, hp), Timeout: callTimeout}
		return func() error { return get(c, url) }, t.CloseIdleConnections, nil
	}
}

// runHedge runs every contender for calls calls from workers workers and
// prints the table.
func runHedge(calls, workers int) error {
	srv, err := startTailServer()
	if err != nil {
		return err
	}
	defer func() { _ = srv.srv.Close() }()
	fmt.Printf("# hedging on a tail\n\n%s, GOMAXPROCS=%d; every %dth request %v, the others %v; %d calls from %d workers each; load average %s\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), tailEvery, tailSlow, tailFast, calls, workers, loadAvg())
	fmt.Println("| client | p50 | p99 | extra requests | allocs/call | errors |")
	fmt.Println("|---|--:|--:|--:|--:|--:|")
	for _, h := range hedgers {
		call, cleanup, err := h.setup(srv.url)
		if err != nil {
			return fmt.Errorf("%s: %w", h.name, err)
		}
		before := srv.reqs.Load()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		lat, errs := hedgeRound(call, calls, workers)
		runtime.ReadMemStats(&ms1)
		cleanup()
		extra := srv.reqs.Load() - before - int64(calls)
		fmt.Printf("| %s | %s | %s | %d (%.1f%%) | %.0f | %d |\n", h.name,
			fmtDur(float64(lat[len(lat)/2])), fmtDur(float64(lat[len(lat)*99/100-1])),
			extra, 100*float64(extra)/float64(calls), float64(ms1.Mallocs-ms0.Mallocs)/float64(calls), errs)
	}
	return nil
}

// hedgeRound makes calls calls from workers goroutines and returns the
// sorted latencies and the number of errors.
func hedgeRound(call func() error, calls, workers int) ([]time.Duration, int) {
	lat := make([]time.Duration, calls)
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(calls); i = next.Add(1) {
				t0 := time.Now()
				if err := call(); err != nil && !errors.Is(err, context.Canceled) {
					errs.Add(1)
				}
				lat[i-1] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, int(errs.Load())
}
