package registry

// Benchmarks of the call pipeline against a raw net/http client with the
// same transport settings, of the fast-fail paths, of the lookup and of
// building a registry of 1,000 systems.
//
//	go test -run '^$' -bench . -benchmem ./registry/
//
// Absolute times on a shared machine are noise: compare raw and registry
// from the same run (benchstat on several interleaved runs), not across
// runs. Every helper here is prefixed "bench" so that it cannot collide
// with the test files of the package.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// benchBody is the small body every benchmark server answers with.
var benchBody = []byte(strings.Repeat("x", 64))

// benchOK answers 200 with benchBody.
func benchOK(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(benchBody)
}

// benchRegistry builds a registry of the one system "bench" whose
// BASE_URL is baseURL, with extra settings given as suffix, value pairs
// ("MAX_CONCURRENT", "64"). The registry is closed in b.Cleanup.
func benchRegistry(b *testing.B, baseURL string, extra ...string) (*Registry, *Client) {
	b.Helper()
	b.Setenv(config.SystemsVar, "bench")
	b.Setenv("BENCH_BASE_URL", baseURL)
	for i := 0; i+1 < len(extra); i += 2 {
		b.Setenv("BENCH_"+extra[i], extra[i+1])
	}
	r, err := FromEnv()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	return r, r.MustClient("bench")
}

// benchRawClient is the raw baseline: a net/http client over the
// transport the registry builds for a system with the same settings
// (transport.go), and http.Client.Timeout = CALL_TIMEOUT. Its idle
// connections are closed in b.Cleanup.
func benchRawClient(b *testing.B, c config.Client) *http.Client {
	t := newTransport(c, nil)
	b.Cleanup(t.CloseIdleConnections)
	return &http.Client{Transport: t, Timeout: c.CallTimeout}
}

// benchGet sends one GET of url through do, reads the whole body and
// closes it.
func benchGet(do func(*http.Request) (*http.Response, error), url string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := do(req)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && (resp.StatusCode != http.StatusOK || n != int64(len(benchBody))) {
		err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return err
}

// benchWorkers runs b.N calls on exactly workers goroutines, each taking
// the next call as soon as its previous one is done, so that workers calls
// are in flight until the last ones. It reports cpu-ns/op, the CPU time
// of the process (client and server) per call, which other load on the
// machine disturbs far less than ns/op.
func benchWorkers(b *testing.B, workers int, call func() error) {
	b.Helper()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	b.ResetTimer()
	cpu0 := benchCPU()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := call(); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	cpu := benchCPU() - cpu0
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkCall is a full GET (request, response, body read and closed)
// through a registry client and through a raw net/http client tuned the
// same way, against one loopback server, with 1, 16 and 64 calls in
// flight. "conns" is the number of connections the server accepted.
func BenchmarkCall(b *testing.B) {
	for _, client := range []string{"raw", "registry"} {
		b.Run(client, func(b *testing.B) {
			for _, inflight := range []int{1, 16, 64} {
				b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
					srv := outboundtest.NewUpstream(b, http.HandlerFunc(benchOK))
					_, c := benchRegistry(b, srv.URL, "MAX_CONCURRENT", "64")
					do := c.Do
					if client == "raw" {
						do = benchRawClient(b, c.Config()).Do
					}
					url := srv.URL + "/item"
					b.ReportAllocs()
					benchWorkers(b, inflight, func() error { return benchGet(do, url) })
					b.ReportMetric(float64(srv.Conns()), "conns")
				})
			}
		})
	}
}

// BenchmarkCallRedirected is a GET answered with a 307 to the same
// origin and then 200, followed through a registry client (net/http's
// redirect rules, through the pipeline) and through a raw net/http
// client, one call in flight.
func BenchmarkCallRedirected(b *testing.B) {
	for _, client := range []string{"raw", "registry"} {
		b.Run(client, func(b *testing.B) {
			srv := outboundtest.NewUpstream(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/from" {
					http.Redirect(w, r, "/item", http.StatusTemporaryRedirect)
					return
				}
				benchOK(w, r)
			}))
			_, c := benchRegistry(b, srv.URL, "MAX_CONCURRENT", "64")
			do := c.Do
			if client == "raw" {
				do = benchRawClient(b, c.Config()).Do
			}
			b.ReportAllocs()
			benchWorkers(b, 1, func() error { return benchGet(do, srv.URL+"/from") })
		})
	}
}

// benchReject runs c.Do(req) in a loop and checks that every call fails
// with an error matching want.
func benchReject(b *testing.B, c *Client, req *http.Request, want error) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			b.Fatal("call went through")
		}
		if !errors.Is(err, want) {
			b.Fatalf("err = %v, want %v", err, want)
		}
	}
}

// BenchmarkRejectBreakerOpen is a call refused by an open breaker: no I/O,
// no goroutine, one allocation (the caller's own *Error).
func BenchmarkRejectBreakerOpen(b *testing.B) {
	srv := outboundtest.NewUpstream(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	_, c := benchRegistry(b, srv.URL, "RETRIES", "0", "BREAKER_MIN_REQUESTS", "1", "BREAKER_OPEN_TIMEOUT", "1h")
	// One 500 opens the breaker for an hour.
	if resp, err := c.Do(benchRequest(b, srv.URL)); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	benchReject(b, c, benchRequest(b, srv.URL), ErrCircuitOpen)
	b.ReportMetric(float64(srv.Requests()), "requests")
}

// BenchmarkRejectBreakerOpenHTTPClient is the same refusal through
// HTTPClient: the made-up 503 that SDKs do not retry (RefusedHeader), with
// net/http's client around it.
func BenchmarkRejectBreakerOpenHTTPClient(b *testing.B) {
	srv := outboundtest.NewUpstream(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	_, c := benchRegistry(b, srv.URL, "RETRIES", "0", "BREAKER_MIN_REQUESTS", "1", "BREAKER_OPEN_TIMEOUT", "1h")
	if resp, err := c.Do(benchRequest(b, srv.URL)); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	hc, req := c.HTTPClient(), benchRequest(b, srv.URL)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := hc.Do(req)
		if err != nil || resp.Header.Get(RefusedHeader) != observe.OpBreaker.Reason() {
			b.Fatalf("got %v, %v; want the refusal", resp, err)
		}
		_ = resp.Body.Close()
	}
	b.ReportMetric(float64(srv.Requests()), "requests")
}

// BenchmarkRejectBulkheadFull is a call refused by a full bulkhead: the
// one permit of MAX_CONCURRENT=1 is held by a response whose body is left
// open until the end.
func BenchmarkRejectBulkheadFull(b *testing.B) {
	srv := outboundtest.NewUpstream(b, http.HandlerFunc(benchOK))
	_, c := benchRegistry(b, srv.URL, "MAX_CONCURRENT", "1")
	held, err := c.Do(benchRequest(b, srv.URL))
	if err != nil {
		b.Fatal(err)
	}
	defer held.Body.Close()
	benchReject(b, c, benchRequest(b, srv.URL), bulkhead.ErrFull)
}

// benchSpentCtx has a deadline 50ms away, within the 100ms reserve, and
// is never done by itself: every call sees a budget that is spent but has
// not expired yet.
type benchSpentCtx struct {
	context.Context
	deadline time.Time
}

func (c benchSpentCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// BenchmarkRejectBudgetSpent is a call refused because the caller's budget
// is spent: within the reserve (deadline 50ms away) and expired.
func BenchmarkRejectBudgetSpent(b *testing.B) {
	srv := outboundtest.NewUpstream(b, http.HandlerFunc(benchOK))
	_, c := benchRegistry(b, srv.URL)
	b.Run("within-reserve", func(b *testing.B) {
		ctx := benchSpentCtx{context.Background(), time.Now().Add(50 * time.Millisecond)}
		benchReject(b, c, benchRequest(b, srv.URL).WithContext(ctx), capbudget.ErrExhausted)
	})
	b.Run("expired", func(b *testing.B) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		benchReject(b, c, benchRequest(b, srv.URL).WithContext(ctx), capbudget.ErrExhausted)
	})
	if n := srv.Requests(); n != 0 {
		b.Fatalf("%d requests reached the server", n)
	}
}

func benchRequest(b *testing.B, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

// BenchmarkClientLookup looks a client up by name in a registry of 16
// systems.
func BenchmarkClientLookup(b *testing.B) {
	names := make([]string, 16)
	for i := range names {
		names[i] = fmt.Sprintf("lookup%02d", i)
		b.Setenv(config.Prefix(names[i])+"_BASE_URL", "http://127.0.0.1:1")
	}
	b.Setenv(config.SystemsVar, strings.Join(names, ","))
	r, err := FromEnv()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	name := names[len(names)/2]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Client(name); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromEnv1000 loads 1,000 systems from the environment and builds
// their clients (transport, bulkhead, breaker each), then closes the
// registry. config's BenchmarkLoad1000 measures the loading alone.
func BenchmarkFromEnv1000(b *testing.B) {
	const n = 1000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("sys%04d", i)
		p := config.Prefix(names[i])
		b.Setenv(p+"_BASE_URL", fmt.Sprintf("https://%s.internal:8443/v1", names[i]))
		b.Setenv(p+"_CONNECT_TIMEOUT", "1s")
		b.Setenv(p+"_READ_TIMEOUT", "5s")
	}
	b.Setenv(config.SystemsVar, strings.Join(names, ","))
	b.ReportAllocs()
	for b.Loop() {
		r, err := FromEnv()
		if err != nil {
			b.Fatal(err)
		}
		if got := len(r.Names()); got != n {
			b.Fatalf("%d systems, want %d", got, n)
		}
		_ = r.Close()
	}
}

// BenchmarkCallAdaptive is BenchmarkCall through the fixed bulkhead and
// the adaptive one (ADAPTIVE_CONCURRENCY), in the same run: the adaptive bulkhead's
// cost per call is a clock read before and after send and one Record (a
// lock and a few comparisons; a sort of 64 durations per window).
// BULKHEAD_MAX_WAIT lets a call wait rather than fail if the adaptive
// limit falls below the calls in flight (on loopback latency grows with
// them too).
//
//	go test -run '^$' -bench CallAdaptive -count 10 ./registry/ | benchstat -col /bulkhead -
func BenchmarkCallAdaptive(b *testing.B) {
	for _, inflight := range []int{1, 16, 64} {
		for _, adaptive := range []string{"false", "true"} {
			name := map[string]string{"false": "fixed", "true": "adaptive"}[adaptive]
			b.Run(fmt.Sprintf("inflight=%d/bulkhead=%s", inflight, name), func(b *testing.B) {
				srv := outboundtest.NewUpstream(b, http.HandlerFunc(benchOK))
				_, c := benchRegistry(b, srv.URL, "MAX_CONCURRENT", "64", "BULKHEAD_MAX_WAIT", "5s",
					"ADAPTIVE_CONCURRENCY", adaptive)
				url := srv.URL + "/item"
				b.ReportAllocs()
				benchWorkers(b, inflight, func() error { return benchGet(c.Do, url) })
				b.ReportMetric(float64(c.Status().Limit), "limit")
			})
		}
	}
}

// BenchmarkHedgeArmed is BenchmarkCall's registry client with hedging
// on (HEDGE_DELAY=1s: armed on every call, never fired against a fast
// loopback server), against the same client with hedging off: what the
// hedge stage costs a call that needs no hedge.
func BenchmarkHedgeArmed(b *testing.B) {
	for _, delay := range []string{"0", "1s"} {
		for _, inflight := range []int{1, 16} {
			b.Run(fmt.Sprintf("delay=%s/inflight=%d", delay, inflight), func(b *testing.B) {
				srv := outboundtest.NewUpstream(b, http.HandlerFunc(benchOK))
				_, c := benchRegistry(b, srv.URL, "MAX_CONCURRENT", "64", "HEDGE_DELAY", delay)
				url := srv.URL + "/item"
				b.ReportAllocs()
				benchWorkers(b, inflight, func() error { return benchGet(c.Do, url) })
			})
		}
	}
}
