// Command bench compares outbound's registry with raw net/http and with
// other resilience libraries on one loopback workload, in one process and
// one run:
//
//	cd bench && go run .
//
// (go run . -hedge runs the hedging comparison of hedge.go instead.)
//
// Every client sends GET requests to the same loopback server (a 64-byte
// body), reads the whole body and closes it, from exactly N worker
// goroutines (N = 1, 16, 64 calls in flight). Rounds are interleaved
// (raw, hand-rolled, outbound, outbound-omit, retryablehttp, failsafe-go,
// hystrix-go, raw, ...), each
// with fresh clients, and the table gives the median of the rounds: requests
// per second, the ratio to raw (median of the per-round ratios, so that
// drift of the machine cancels out), latency p50 and p99, heap allocations
// and bytes per call (runtime.MemStats deltas over the round, client and
// server together, divided by calls) and the connections the server
// accepted in the round.
//
// Every client is configured alike: the same tuned transport as the
// registry gives a system (pool sized to 64, connect, TLS and
// response-header timeouts), a 15s bound on the whole call, 2 retries with
// backoff for idempotent requests, and a breaker where the library has
// one. This module is separate from outbound's (see go.mod), so that none
// of the peers ever enters outbound's dependencies.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afex/hystrix-go/hystrix"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/sync/semaphore"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// Settings every client shares: the registry's baseline.
const (
	poolSize       = 64
	callTimeout    = 15 * time.Second
	connectTimeout = 2 * time.Second
	tlsTimeout     = 3 * time.Second
	readTimeout    = 10 * time.Second
	idleTimeout    = 90 * time.Second
	retries        = 2
	backoffBase    = 100 * time.Millisecond
	backoffMax     = 2 * time.Second
)

var body = []byte(strings.Repeat("x", 64))

func main() {
	rounds := flag.Int("rounds", 7, "rounds per client and in-flight level (the table shows the median)")
	duration := flag.Duration("duration", 500*time.Millisecond, "measured duration of one round")
	inflight := flag.String("inflight", "1,16,64", "comma-separated numbers of calls in flight")
	only := flag.String("clients", "", "comma-separated subset of clients to run (default: all)")
	hedge := flag.Bool("hedge", false, "run the hedging comparison on a slow tail instead (hedge.go)")
	flag.Parse()
	if *hedge {
		if err := runHedge(2000, 20); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}

	levels, err := parseLevels(*inflight)
	if err != nil || *rounds < 1 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "bench: bad flags:", err)
		flag.Usage()
		os.Exit(2)
	}
	clients := allClients
	if *only != "" {
		clients = nil
		for _, name := range strings.Split(*only, ",") {
			i := slices.IndexFunc(allClients, func(c client) bool { return c.name == strings.TrimSpace(name) })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "bench: unknown client %q\n", name)
				os.Exit(2)
			}
			clients = append(clients, allClients[i])
		}
	}

	srv, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer srv.close()

	fmt.Printf("# outbound peer comparison\n\n")
	fmt.Printf("%s, %s/%s, GOMAXPROCS=%d, NumCPU=%d, CPU: %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.GOMAXPROCS(0), runtime.NumCPU(), cpuModel())
	fmt.Printf("loopback HTTP/1.1 GET, %d-byte body read and closed; %d rounds of %v per cell, interleaved; medians\n",
		len(body), *rounds, *duration)
	fmt.Printf("load average at start: %s\n\n", loadAvg())

	start := time.Now()
	type cell struct{ runs []result }
	cells := make(map[string]*cell)
	key := func(c string, n int) string { return c + "/" + strconv.Itoa(n) }
	for _, n := range levels {
		for r := 0; r < *rounds; r++ {
			for _, c := range clients {
				res, err := runRound(c, n, *duration, srv)
				if err != nil {
					fmt.Fprintf(os.Stderr, "bench: %s at %d in flight: %v\n", c.name, n, err)
					os.Exit(1)
				}
				k := key(c.name, n)
				if cells[k] == nil {
					cells[k] = &cell{}
				}
				cells[k].runs = append(cells[k].runs, res)
				fmt.Fprintf(os.Stderr, "  %-14s inflight=%-3d round %d: %8.0f req/s\n", c.name, n, r+1, res.rps)
			}
		}
	}

	fmt.Println("| client | in flight | req/s | vs raw | p50 | p99 | allocs/call | B/call | conns | errors |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, n := range levels {
		raw := cells[key("raw", n)]
		for _, c := range clients {
			runs := cells[key(c.name, n)].runs
			ratio := "–"
			if raw != nil {
				rs := make([]float64, len(runs))
				for i := range runs {
					rs[i] = runs[i].rps / raw.runs[i].rps
				}
				ratio = fmt.Sprintf("%.2fx", median(rs))
			}
			errs := 0
			for _, r := range runs {
				errs += r.errors
			}
			fmt.Printf("| %s | %d | %.0f | %s | %s | %s | %.1f | %.0f | %.0f | %d |\n", c.name, n,
				median(field(runs, func(r result) float64 { return r.rps })), ratio,
				fmtDur(median(field(runs, func(r result) float64 { return r.p50 }))),
				fmtDur(median(field(runs, func(r result) float64 { return r.p99 }))),
				median(field(runs, func(r result) float64 { return r.allocs })),
				median(field(runs, func(r result) float64 { return r.bytes })),
				median(field(runs, func(r result) float64 { return float64(r.conns) })), errs)
		}
	}
	fmt.Printf("\ntotal run time %v; load average at the end: %s\n", time.Since(start).Round(100*time.Millisecond), loadAvg())
}

// client is one contender: setup builds a fresh client for a round and
// returns its call (one GET, body read and closed) and its cleanup.
type client struct {
	name  string
	setup func(url string, inflight int) (call func() error, cleanup func(), err error)
}

var allClients = []client{
	{"raw", setupRaw},
	{"hand-rolled", setupHandRolled},
	{"outbound", setupOutbound},
	{"outbound-omit", setupOutboundOmit},
	{"retryablehttp", setupRetryable},
	{"failsafe-go", setupFailsafe},
	{"hystrix-go", setupHystrix},
}

// transport is the tuned transport every client uses, as the registry
// builds it for a system (registry/transport.go).
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}
	t.DialContext = d.DialContext
	t.TLSHandshakeTimeout = tlsTimeout
	t.ResponseHeaderTimeout = readTimeout
	t.IdleConnTimeout = idleTimeout
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = poolSize
	t.MaxConnsPerHost = poolSize
	t.ForceAttemptHTTP2 = true
	return t
}

// consume reads resp's body to the end, closes it and checks the answer.
func consume(resp *http.Response) error {
	n, err := io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && (resp.StatusCode != http.StatusOK || n != int64(len(body))) {
		err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return err
}

func get(c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	return consume(resp)
}

// setupRaw: net/http with the tuned transport and Timeout = CALL_TIMEOUT;
// no retry, no breaker, no bulkhead.
func setupRaw(url string, _ int) (func() error, func(), error) {
	t := transport()
	c := &http.Client{Transport: t, Timeout: callTimeout}
	return func() error { return get(c, url) }, t.CloseIdleConnections, nil
}

// setupOutbound: a registry of one system with the baseline settings
// (retries 2, breaker, retry budget, CALL_TIMEOUT 15s, X-Time-Budget sent)
// and MAX_CONCURRENT 64 (or the number in flight if larger).
func setupOutbound(url string, inflight int) (func() error, func(), error) {
	return setupOutboundWith(url, inflight, false)
}

// setupOutboundOmit: setupOutbound with OMIT_TIME_BUDGET=true, as for a
// third party: no X-Time-Budget header per attempt.
func setupOutboundOmit(url string, inflight int) (func() error, func(), error) {
	return setupOutboundWith(url, inflight, true)
}

func setupOutboundWith(url string, inflight int, omit bool) (func() error, func(), error) {
	env := map[string]string{
		config.SystemsVar:        "bench",
		"BENCH_BASE_URL":         url,
		"BENCH_MAX_CONCURRENT":   strconv.Itoa(max(poolSize, inflight)),
		"BENCH_OMIT_TIME_BUDGET": strconv.FormatBool(omit),
	}
	for k, v := range env {
		if err := os.Setenv(k, v); err != nil {
			return nil, nil, err
		}
	}
	r, err := registry.FromEnv()
	if err != nil {
		return nil, nil, err
	}
	call, stop := registryCall(r, url)
	return call, stop, nil
}

// registryCall returns a GET of url through r's "bench" client, and the
// function that closes r.
func registryCall(r *registry.Registry, url string) (func() error, func()) {
	c := r.MustClient("bench")
	call := func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		return consume(resp)
	}
	return call, func() { _ = r.Close() }
}

// setupHandRolled: the reference of issue 11, what a careful engineer
// writes by hand from the same parts as the registry: an x/sync semaphore
// of 64 (TryAcquire; the permit held until the body is closed), a
// gobreaker/v2 breaker per attempt (the registry's counting: 408, 429 and
// 5xx are failures) and a retry loop (2 retries of temporary statuses and
// transport errors, backoff 100ms..2s with full jitter), the tuned
// transport and Timeout = CALL_TIMEOUT. It has no deadline cap from the
// caller's budget, no permit timer for a forgotten body, no X-Time-Budget
// and no observers: the registry's extra work is measured against it.
func setupHandRolled(url string, inflight int) (func() error, func(), error) {
	t := transport()
	c := &http.Client{Transport: t, Timeout: callTimeout}
	sem := semaphore.NewWeighted(int64(max(poolSize, inflight)))
	cb := gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name: "hand-rolled", Interval: 30 * time.Second, Timeout: 15 * time.Second,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			return n.Requests >= 20 && float64(n.TotalFailures) >= 0.5*float64(n.Requests)
		},
	})
	errTemporary := errors.New("temporary status")
	temporary := func(code int) bool {
		return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
	}
	call := func() error {
		if !sem.TryAcquire(1) {
			return errors.New("hand-rolled: bulkhead full")
		}
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			sem.Release(1)
			return err
		}
		var resp *http.Response
		for n := 0; ; n++ {
			resp, err = cb.Execute(func() (*http.Response, error) {
				resp, err := c.Do(req)
				if err == nil && temporary(resp.StatusCode) {
					return resp, errTemporary
				}
				return resp, err
			})
			if err == errTemporary && n == retries {
				err = nil // retries ran out: the caller gets the response
			}
			if err == nil || n == retries || errors.Is(err, gobreaker.ErrOpenState) {
				break
			}
			if resp != nil {
				_, _ = io.CopyN(io.Discard, resp.Body, 256<<10)
				_ = resp.Body.Close()
			}
			time.Sleep(time.Duration(rand.Int64N(int64(min(backoffMax, backoffBase<<n)) + 1)))
		}
		if err != nil {
			sem.Release(1)
			return err
		}
		resp.Body = &releaseBody{ReadCloser: resp.Body, sem: sem}
		return consume(resp)
	}
	return call, t.CloseIdleConnections, nil
}

// releaseBody gives the hand-rolled reference's permit back on Close.
type releaseBody struct {
	io.ReadCloser
	sem  *semaphore.Weighted
	once sync.Once
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.sem.Release(1) })
	return err
}

// setupRetryable: go-retryablehttp with 2 retries, backoff 100ms..2s, the
// tuned transport and Timeout = CALL_TIMEOUT; no breaker, no bulkhead.
func setupRetryable(url string, _ int) (func() error, func(), error) {
	t := transport()
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: t, Timeout: callTimeout}
	c.RetryMax = retries
	c.RetryWaitMin = backoffBase
	c.RetryWaitMax = backoffMax
	c.Logger = nil
	call := func() error {
		req, err := retryablehttp.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		return consume(resp)
	}
	return call, t.CloseIdleConnections, nil
}

// setupFailsafe: failsafe-go's failsafehttp round tripper with a bulkhead
// of 64 (outermost), failsafehttp's retry policy (2 retries, backoff
// 100ms..2s) and a circuit breaker per attempt (50% failures over at least
// 20 attempts in 30s, open 15s), the tuned transport, Timeout =
// CALL_TIMEOUT.
func setupFailsafe(url string, inflight int) (func() error, func(), error) {
	t := transport()
	bh := bulkhead.NewBuilder[*http.Response](uint(max(poolSize, inflight))).Build()
	rp := failsafehttp.NewRetryPolicyBuilder().
		WithMaxRetries(retries).
		WithBackoff(backoffBase, backoffMax).
		Build()
	cb := circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(func(resp *http.Response, err error) bool {
			return err != nil || resp.StatusCode == http.StatusRequestTimeout ||
				resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		}).
		WithFailureRateThreshold(0.5, 20, 30*time.Second).
		WithDelay(15 * time.Second).
		Build()
	c := &http.Client{Transport: failsafehttp.NewRoundTripper(t, bh, rp, cb), Timeout: callTimeout}
	return func() error { return get(c, url) }, t.CloseIdleConnections, nil
}

var hystrixSeq atomic.Int64

// hystrixMaxConcurrent is hystrix-go's MaxConcurrentRequests. hystrix-go
// hands its tickets back on a goroutine of its own after Do has returned,
// so with 64 it rejects calls (hystrix: max concurrency) even at 1 in
// flight; it gets headroom instead, and the comparison stays one of
// overhead, not of rejections.
const hystrixMaxConcurrent = 1024

// setupHystrix: hystrix-go's Do around a raw call (body read inside),
// with hystrixMaxConcurrent tickets, a 15s timeout and its breaker (50%
// errors over at least 20 requests, sleep 15s); hystrix has no retry.
func setupHystrix(url string, inflight int) (func() error, func(), error) {
	t := transport()
	c := &http.Client{Transport: t, Timeout: callTimeout}
	name := fmt.Sprintf("bench-%d", hystrixSeq.Add(1)) // a fresh circuit per round
	hystrix.ConfigureCommand(name, hystrix.CommandConfig{
		Timeout:                int(callTimeout / time.Millisecond),
		MaxConcurrentRequests:  max(hystrixMaxConcurrent, inflight),
		RequestVolumeThreshold: 20,
		SleepWindow:            int(15 * time.Second / time.Millisecond),
		ErrorPercentThreshold:  50,
	})
	call := func() error {
		return hystrix.Do(name, func() error { return get(c, url) }, nil)
	}
	return call, t.CloseIdleConnections, nil
}

// server is the loopback server every client calls; it counts the
// connections it accepts.
type server struct {
	url   string
	srv   *http.Server
	ln    net.Listener
	conns atomic.Int64
}

func startServer() (*server, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{url: "http://" + ln.Addr().String() + "/item", ln: ln}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(body)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *server) close() { _ = s.srv.Close() }

// result is one round of one client.
type result struct {
	rps, p50, p99 float64 // p50, p99 in ns
	allocs, bytes float64 // per call
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
// d and tallies the round.
func runRound(c client, inflight int, d time.Duration, srv *server) (result, error) {
	conns0 := srv.conns.Load()
	call, cleanup, err := c.setup(srv.url, inflight)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	workers := make([]worker, inflight)

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
			return result{}, fmt.Errorf("warm-up: %w", err)
		}
	}

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
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
	elapsed := time.Since(t0)
	runtime.ReadMemStats(&m1)

	var all histogram
	res := result{conns: srv.conns.Load() - conns0}
	calls := 0
	var first error
	for i := range workers {
		all.merge(&workers[i].hist)
		calls += workers[i].calls
		res.errors += workers[i].errors
		if first == nil {
			first = workers[i].first
		}
	}
	if first != nil {
		fmt.Fprintf(os.Stderr, "  %s: %d errors, the first: %v\n", c.name, res.errors, first)
	}
	if calls == 0 {
		return result{}, errors.New("no call finished")
	}
	res.rps = float64(calls) / elapsed.Seconds()
	res.p50 = all.quantile(0.50)
	res.p99 = all.quantile(0.99)
	res.allocs = float64(m1.Mallocs-m0.Mallocs) / float64(calls)
	res.bytes = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(calls)
	return res, nil
}

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

func parseLevels(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("in-flight level %q", f)
		}
		out = append(out, n)
	}
	return out, nil
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

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
