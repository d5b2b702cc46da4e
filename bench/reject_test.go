package main

// The cost of a refused call, through the registry and through the
// hand-rolled reference, on the fast-fail paths: an open breaker and a
// full bulkhead. No I/O, no goroutine; the figures that matter are
// ns/op (or cpu-ns/op on a busy machine) and allocs/op, measured on one
// pinned CPU:
//
//	cd bench && go test -c -o /tmp/bench.test . &&
//	GOMAXPROCS=1 taskset -c 0 /tmp/bench.test -test.run '^$' \
//		-test.bench Reject -test.benchmem -test.count 6
//
// Each refusal allocates one value, the caller's *registry.Error (96 B).
// On a shared 2-core AMD EPYC VM (Go 1.26), in four runs of 8 to 12
// samples, the absolute cpu-ns/op moved by up to 40% from run to run
// with the machine's load, the ratios much less: an open breaker's
// refusal took 1.3x to 1.7x the reference's (gobreaker's Execute
// refusing, which takes its lock and reads the clock; outbound reads
// the clock only), a full bulkhead's 7x to 9x (a bare TryAcquire,
// 11 to 18 ns). A full bulkhead's refusal spends about half its time
// allocating its error (GC included: this benchmark's heap is small),
// about 35 ns on the entry's checks that come before the bulkhead (the
// registry's closed flag, the URL's origin, the caller's budget, an
// operator's override, the breaker's last state), and about 13 ns in
// the caller's errors.Is through the *registry.Error to bulkhead.ErrFull
// (the reference compares a bare sentinel).

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/registry"
)

// rejectLoop sends req through do in a loop and checks that every call
// is refused with an error matching want. Besides ns/op it reports
// cpu-ns/op, the process's CPU time per call: a refusal never blocks, so
// the two agree on a quiet machine, and on a busy one cpu-ns/op leaves
// out the time other processes held the CPU.
func rejectLoop(b *testing.B, do func(*http.Request) (*http.Response, error), req *http.Request, want error) {
	b.Helper()
	b.ReportAllocs()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	for b.Loop() {
		resp, err := do(req)
		if err == nil {
			_ = resp.Body.Close()
			b.Fatal("call went through")
		}
		if !errors.Is(err, want) {
			b.Fatalf("err = %v, want %v", err, want)
		}
	}
}

// rejectClient is the "bench" client of a registry built from env (the
// system's variables) over url, closed in b.Cleanup.
func rejectClient(b *testing.B, url string, env map[string]string) *registry.Client {
	b.Helper()
	env["BENCH_BASE_URL"] = url
	r, err := benchRegistry(env)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	return r.MustClient("bench")
}

// rejectHandRolled is the hand-rolled reference with permits permits
// over a transport whose idle connections b.Cleanup closes.
func rejectHandRolled(b *testing.B, permits int) *handRolled {
	t := transport()
	b.Cleanup(t.CloseIdleConnections)
	return newHandRolled(t, permits)
}

func newRejectRequest(b *testing.B, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

func discard(resp *http.Response, err error) {
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// BenchmarkRejectBreakerOpen is a call refused by an open breaker.
func BenchmarkRejectBreakerOpen(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	b.Cleanup(srv.Close)
	req := newRejectRequest(b, srv.URL)
	b.Run("client=outbound", func(b *testing.B) {
		c := rejectClient(b, srv.URL, map[string]string{
			"BENCH_RETRIES": "0", "BENCH_BREAKER_MIN_REQUESTS": "1", "BENCH_BREAKER_OPEN_TIMEOUT": "1h",
		})
		discard(c.Do(req)) // one 500 opens the breaker for an hour
		rejectLoop(b, c.Do, req, registry.ErrCircuitOpen)
	})
	b.Run("client=hand-rolled", func(b *testing.B) {
		h := rejectHandRolled(b, poolSize)
		for range 20 { // the reference trips on 20 failed attempts
			_, _ = h.cb.Execute(func() (*http.Response, error) { return nil, errTemporary })
		}
		rejectLoop(b, h.Do, req, gobreaker.ErrOpenState)
	})
}

// BenchmarkRejectBulkheadFull is a call refused by a full bulkhead: the
// one permit is held by a response whose body stays open until the end.
func BenchmarkRejectBulkheadFull(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	req := newRejectRequest(b, srv.URL)
	b.Run("client=outbound", func(b *testing.B) {
		c := rejectClient(b, srv.URL, map[string]string{"BENCH_MAX_CONCURRENT": "1"})
		held, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer discard(held, nil)
		rejectLoop(b, c.Do, req, bulkhead.ErrFull)
	})
	b.Run("client=hand-rolled", func(b *testing.B) {
		h := rejectHandRolled(b, 1)
		held, err := h.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer discard(held, nil)
		rejectLoop(b, h.Do, req, errHandRolledFull)
	})
}
