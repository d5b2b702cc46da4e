package registry

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/outboundtest"
)

// reusedConns is how many connections n calls that each hand their
// connection back may open beyond those they need at once: none on an idle
// machine, a tenth of n here, for the few that a loaded machine makes
// net/http or the registry give up on. net/http drops a connection whose
// request write it has not seen finish 50ms after the response (its
// maxWriteWaitBeforeConnReuse), and a drain that has not read a body
// within drainMaxWait (50ms) closes its connection instead. Either is a
// scheduling delay, and rare: 3 extra connections for 1,222 requests at 32
// in flight in the 503 storm of TestLeaksAfterFailingCalls beside a second
// run of the suite. A call that does not hand its connection back costs
// one each: n.
func reusedConns(n int) int64 { return int64(n) / 10 }

// Sequential calls reuse one connection, even when every call is answered
// first with a 503 carrying a 64 KiB body and then, on the retry, with 200:
// the retry stage drains the error body so its connection goes back to the
// pool before the retry is sent.
func TestConnReuseSequentialWithDrainedRetries(t *testing.T) {
	t.Parallel()
	const calls = 50
	steps := make([]outboundtest.Reply, 0, 2*calls)
	for range calls {
		steps = append(steps, testutil.LargeBody(http.StatusServiceUnavailable, testutil.LargeBodySize),
			outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	}
	srv := testutil.Script(t, steps...)
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":         "inv",
		"INV_BASE_URL":             srv.URL,
		"INV_RETRIES":              "1",
		"INV_BACKOFF_BASE":         "1ms",
		"INV_BACKOFF_MAX":          "1ms",
		"INV_RETRY_BUDGET_RATIO":   "1",
		"INV_BREAKER_MIN_REQUESTS": "100000",
	})
	defer r.Close()
	c := r.MustClient("inv")

	for i := range calls {
		if res := resilGet(c, "/stock", resilBound); res.err != nil || res.status != http.StatusOK || res.body != "ok" {
			t.Fatalf("call %d: %v, want 200 ok after one retry", i+1, res)
		}
	}
	if got := srv.Hits(); got != 2*calls {
		t.Fatalf("server hits = %d, want %d (a 503 and a 200 per call)", got, 2*calls)
	}
	if st := c.Status(); st.Retries != calls || st.RetriesThrottled != 0 {
		t.Fatalf("retries %d, retry budget denied %d; want %d, 0", st.Retries, st.RetriesThrottled, calls)
	}
	if got := srv.Conns(); got > 1+reusedConns(calls) {
		t.Fatalf("%d calls (%d requests, %d 64 KiB error bodies) opened %d connections, want 1 (%d on a loaded machine)",
			calls, srv.Hits(), calls, got, 1+reusedConns(calls))
	}
}

// 100 calls at 20 in flight use at most 20 connections (MAX_CONCURRENT
// sizes the pool): the first 20 are held at a gate together, so exactly 20
// are opened, and the other 80 calls reuse them (with net/http's default
// of 2 idle connections per host they opened 37 in one run).
func TestConnPoolBoundedByMaxConcurrent(t *testing.T) {
	t.Parallel()
	gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	srv := outboundtest.NewUpstream(t, gate)
	const workers, perWorker = 20, 5
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":   "inv",
		"INV_BASE_URL":       srv.URL,
		"INV_MAX_CONCURRENT": "20",
	})
	defer r.Close()
	c := r.MustClient("inv")

	errs := make(chan resilResult, workers*perWorker)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perWorker {
				if res := resilGet(c, "/x", resilBound); res.err != nil || res.status != http.StatusOK {
					errs <- res
				}
			}
		})
	}
	resilWaitParked(t, gate, workers)
	gate.Release()
	wg.Wait()
	close(errs)
	for res := range errs {
		t.Errorf("call: %v, want 200", res)
	}
	if got := srv.Requests(); got != workers*perWorker {
		t.Fatalf("server requests = %d, want %d", got, workers*perWorker)
	}
	if got := srv.MaxInFlight(); got > workers {
		t.Fatalf("server max active = %d, want <= %d", got, workers)
	}
	if got := srv.Conns(); got < workers || got > workers+reusedConns(workers*perWorker) {
		t.Fatalf("%d calls at %d in flight opened %d connections, want %d (%d on a loaded machine)",
			workers*perWorker, workers, got, workers, workers+reusedConns(workers*perWorker))
	}
	if st := c.Status(); st.InFlight != 0 || st.BulkheadRefused != 0 {
		t.Fatalf("in flight %d, rejected %d; want 0, 0", st.InFlight, st.BulkheadRefused)
	}
}

// A caller that closes a body without reading it. net/http does not drain
// on Close (with Go 1.26 an unread body costs its connection), but the
// registry does for a body of known length up to 256 KiB: 20 calls, 2
// bytes or 64 KiB, use one connection. Also: no permit held after Close,
// reuse once bodies are read to EOF, and no connection left open once the
// registry is closed.
func TestConnBodyClosedUnread(t *testing.T) {
	for _, size := range []int{2, testutil.LargeBodySize} {
		t.Run(strconv.Itoa(size)+"B", func(t *testing.T) {
			srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusOK, Body: strings.Repeat("b", size)})
			r := loadRegistry(t, map[string]string{
				"OUTBOUND_SYSTEMS": "inv",
				"INV_BASE_URL":     srv.URL,
			})
			defer r.Close()
			c := r.MustClient("inv")
			fdsBefore := testutil.CheckFDs(t)

			const calls = 20
			for i := range calls {
				resp := resilOpen(t, c, "/x")
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("call %d: status %d", i+1, resp.StatusCode)
				}
				if err := resp.Body.Close(); err != nil {
					t.Fatalf("call %d: Close: %v", i+1, err)
				}
				if st := c.Status(); st.InFlight != 0 {
					t.Fatalf("call %d: in flight after Close = %d, want 0", i+1, st.InFlight)
				}
			}
			if conns := srv.Conns(); conns > 1+reusedConns(calls) {
				t.Fatalf("%d calls whose %d-byte bodies were closed unread opened %d connections, want 1 (drained on Close; %d on a loaded machine)",
					calls, size, conns, 1+reusedConns(calls))
			}

			// A body read to EOF afterwards goes back to the pool.
			before := srv.Conns()
			for range 5 {
				if res := resilGet(c, "/x", resilBound); res.err != nil || len(res.body) != size {
					t.Fatalf("read-to-EOF call: %v", res)
				}
			}
			if got := srv.Conns() - before; got > 1 {
				t.Fatalf("5 calls read to EOF opened %d connections, want at most 1", got)
			}

			// The upstream's own count, not the process's descriptors,
			// which other tests' late closes move.
			_ = r.Close()
			testutil.Eventually(t, resilBound, "connections closed", func() bool { return srv.OpenConns() == 0 })
			t.Logf("descriptors: %d before, %d after Close", fdsBefore, testutil.CheckFDs(t))
		})
	}
}

// HTTPClient() runs the same pipeline and shares the same pool: sequential
// requests through it use one connection.
func TestConnReuseHTTPClient(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv",
		"INV_BASE_URL":     srv.URL,
	})
	defer r.Close()
	c := r.MustClient("inv")
	hc := c.HTTPClient()

	const calls = 10
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/items", nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("call %d: %v", i+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Fatalf("call %d: status %d, body %q, %v", i+1, resp.StatusCode, b, err)
		}
	}
	if got := srv.Requests(); got != calls {
		t.Fatalf("server requests = %d, want %d", got, calls)
	}
	if got := srv.Conns(); got > 1+reusedConns(calls) {
		t.Fatalf("%d sequential HTTPClient() calls opened %d connections, want 1 (%d on a loaded machine)", calls, got, 1+reusedConns(calls))
	}
	if st := c.Status(); st.Calls != calls || st.InFlight != 0 {
		t.Fatalf("calls %d, in flight %d; want %d, 0", st.Calls, st.InFlight, calls)
	}
}

// A small chunked body closed unread keeps its connection.
func TestConnKeptWhenChunkedBodyClosedUnread(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush() // headers first: the body is chunked
		_, _ = io.WriteString(w, strings.Repeat("c", 1024))
	}))
	c := tbrClient(t, srv.URL, tbrFast())
	const calls = 50
	for i := range calls {
		resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if resp.ContentLength != -1 {
			t.Fatalf("ContentLength = %d, want -1 (chunked)", resp.ContentLength)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatalf("call %d: Close: %v", i+1, err)
		}
	}
	if n := srv.Conns(); n > 1+reusedConns(calls) {
		t.Fatalf("%d calls whose chunked bodies were closed unread opened %d connections, want 1 (%d on a loaded machine)", calls, n, 1+reusedConns(calls))
	}
}

// A small body closed unread is drained, so its connection is reused.
func TestConnKeptWhenSmallBodyClosedUnread(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, outboundtest.NewScript(outboundtest.Reply{Body: strings.Repeat("x", 2048)}))
	r := loadRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL})
	defer r.Close()
	c := r.MustClient("inv")
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/x", nil)
		resp, err := c.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("call %d: %v", i+1, err)
		}
		resp.Body.Close() // unread
		cancel()
	}
	if n := srv.Conns(); n > 1+reusedConns(20) {
		t.Fatalf("20 calls whose small bodies were closed unread opened %d connections, want 1 (%d on a loaded machine)", n, 1+reusedConns(20))
	}
}
