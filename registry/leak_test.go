package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// resilHammer runs check(i) for i in [0, n) on workers goroutines and
// reports the first few results that failed it.
func resilHammer(t *testing.T, kind string, n, workers int, check func(i int) error) time.Duration {
	t.Helper()
	start := time.Now()
	var next, bad atomic.Int64
	var mu sync.Mutex
	var first []string
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := check(i); err != nil {
					bad.Add(1)
					mu.Lock()
					if len(first) < 3 {
						first = append(first, fmt.Sprintf("call %d: %v", i, err))
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if b := bad.Load(); b > 0 {
		t.Errorf("%s: %d of %d calls did not fail as expected, e.g.\n\t%s", kind, b, n, strings.Join(first, "\n\t"))
	}
	return took
}

// resilWantOp checks that err is a failure of system at stage op.
func resilWantOp(err error, system string, ops ...observe.Op) error {
	if err == nil {
		return errors.New("no error")
	}
	var e *Error
	if !errors.As(err, &e) {
		return fmt.Errorf("%v (%T) does not wrap a *Error", err, err)
	}
	if e.System != system {
		return fmt.Errorf("%v names system %q, want %q", err, e.System, system)
	}
	for _, op := range ops {
		if e.Op == op {
			return nil
		}
	}
	return fmt.Errorf("%v: op %q, want one of %q", err, e.Op, ops)
}

// A thousand failing calls of every kind leave no goroutine and no
// descriptor behind once the registry is closed: 5xx storms (with a retry
// and drained bodies), connection resets, read timeouts, refused
// connections, an open breaker, a full bulkhead and a spent caller budget.
func TestLeaksAfterFailingCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("7,000 calls")
	}
	storm := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: strings.Repeat("e", 4096)})
	reset := testutil.Script(t, outboundtest.Reply{Handler: outboundtest.Reset()})
	slow := outboundtest.NewUpstream(t, outboundtest.NewHang(nil))
	refused := testutil.RefusedAddr(t)
	tripped := testutil.Script(t, outboundtest.Reply{Status: http.StatusInternalServerError})
	gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	full := outboundtest.NewUpstream(t, gate)

	retrying := func(prefix, url string) map[string]string {
		return map[string]string{
			prefix + "_BASE_URL":             url,
			prefix + "_RETRIES":              "1",
			prefix + "_BACKOFF_BASE":         "1ms",
			prefix + "_BACKOFF_MAX":          "2ms",
			prefix + "_MAX_CONCURRENT":       "64",
			prefix + "_BREAKER_MIN_REQUESTS": "100000",
		}
	}
	env := map[string]string{
		"OUTBOUND_SYSTEMS": "leak-storm,leak-reset,leak-slow,leak-refused,leak-tripped,leak-full,leak-spent",

		"LEAK_SLOW_BASE_URL":              slow.URL,
		"LEAK_SLOW_CONNECT_TIMEOUT":       "200ms",
		"LEAK_SLOW_TLS_HANDSHAKE_TIMEOUT": "250ms",
		"LEAK_SLOW_READ_TIMEOUT":          "250ms",
		"LEAK_SLOW_CALL_TIMEOUT":          "5s", // far beyond the read timeout, even on a loaded machine
		"LEAK_SLOW_RETRIES":               "0",
		"LEAK_SLOW_MAX_CONCURRENT":        "64",
		"LEAK_SLOW_BREAKER_MIN_REQUESTS":  "100000",

		"LEAK_TRIPPED_BASE_URL":              tripped.URL,
		"LEAK_TRIPPED_RETRIES":               "0",
		"LEAK_TRIPPED_BREAKER_MIN_REQUESTS":  "1",
		"LEAK_TRIPPED_BREAKER_FAILURE_RATIO": "1",
		"LEAK_TRIPPED_BREAKER_OPEN_TIMEOUT":  "10m",

		"LEAK_FULL_BASE_URL":       full.URL,
		"LEAK_FULL_MAX_CONCURRENT": "1",

		"LEAK_SPENT_BASE_URL": storm.URL,
	}
	for _, m := range []map[string]string{
		retrying("LEAK_STORM", storm.URL),
		retrying("LEAK_RESET", reset.URL),
		retrying("LEAK_REFUSED", "http://"+refused),
	} {
		for k, v := range m {
			env[k] = v
		}
	}
	r := loadRegistry(t, env)
	defer r.Close()

	// Every server and listener is up and the registry is built: what is
	// running now is the baseline.
	runtime.GC()
	g0 := runtime.NumGoroutine()
	fd0 := testutil.CheckFDs(t)
	start := time.Now()

	const n, workers = 1000, 32
	get := func(c *Client, d time.Duration) resilResult { return resilGet(c, "/fail", d) }

	c := r.MustClient("leak-storm")
	took := resilHammer(t, "503 storm", n, workers, func(int) error {
		res := get(c, resilBound)
		if res.err != nil || res.status != http.StatusServiceUnavailable || len(res.body) != 4096 {
			return fmt.Errorf("%v, want the 503 response", res)
		}
		return nil
	})
	st := c.Status()
	t.Logf("503 storm: %v; server hits %d, conns %d; retries %d, retry budget denied %d",
		took, storm.Hits(), storm.Conns(), st.Retries, st.RetriesThrottled)
	// Drained error bodies keep connections in the pool. Not exactly
	// workers: under load net/http closes a connection whose request
	// write it has not seen finish 50ms after the response (its
	// maxWriteWaitBeforeConnReuse), so allow for some being replaced.
	if got := storm.Conns(); got > n/4 {
		t.Errorf("503 storm: %d conns for %d calls at %d in flight, want them reused", got, n, workers)
	}

	c = r.MustClient("leak-reset")
	took = resilHammer(t, "reset", n, workers, func(int) error {
		res := get(c, resilBound)
		if err := resilWantOp(res.err, "leak-reset", observe.OpTransport); err != nil {
			return err
		}
		if !errors.Is(res.err, syscall.ECONNRESET) && !strings.Contains(res.err.Error(), "EOF") {
			return fmt.Errorf("%v, want a connection reset", res.err)
		}
		return nil
	})
	t.Logf("resets: %v; server requests %d, conns %d", took, reset.Requests(), reset.Conns())

	// Read timeouts take READ_TIMEOUT each: run them at 64 in flight. On
	// a loaded machine a loopback connect can miss even a 200ms
	// CONNECT_TIMEOUT; such a call is a timeout too, and is counted.
	c = r.MustClient("leak-slow")
	var readTimeouts atomic.Int64
	took = resilHammer(t, "read timeout", n, 2*workers, func(int) error {
		res := get(c, resilBound)
		if err := resilWantOp(res.err, "leak-slow", observe.OpReadTimeout, observe.OpConnectTimeout); err != nil {
			return err
		}
		var e *Error
		if errors.As(res.err, &e) && !e.Timeout() {
			return fmt.Errorf("%v: Timeout() = false", res.err)
		}
		if e.Op == observe.OpReadTimeout {
			readTimeouts.Add(1)
		}
		return nil
	})
	t.Logf("read timeouts: %v; %d read timeouts, %d connect timeouts; server requests %d, conns %d",
		took, readTimeouts.Load(), n-readTimeouts.Load(), slow.Requests(), slow.Conns())
	if got := readTimeouts.Load(); got < n/2 {
		t.Errorf("only %d of %d calls to the slow server were read timeouts", got, n)
	}

	c = r.MustClient("leak-refused")
	took = resilHammer(t, "refused", n, workers, func(int) error {
		res := get(c, resilBound)
		if err := resilWantOp(res.err, "leak-refused", observe.OpConnect); err != nil {
			return err
		}
		if !errors.Is(res.err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%v, want ECONNREFUSED", res.err)
		}
		return nil
	})
	t.Logf("refused: %v", took)

	c = r.MustClient("leak-tripped")
	if res := get(c, resilBound); res.err != nil || res.status != http.StatusInternalServerError {
		t.Fatalf("tripping call: %v, want 500", res)
	}
	if st := c.Status(); st.Breaker != observe.BreakerOpen {
		t.Fatalf("leak-tripped breaker %s, want open", st.Breaker)
	}
	took = resilHammer(t, "breaker open", n, workers, func(int) error {
		res := get(c, resilBound)
		if !errors.Is(res.err, ErrCircuitOpen) {
			return fmt.Errorf("%v, want ErrCircuitOpen", res)
		}
		return resilWantOp(res.err, "leak-tripped", observe.OpBreaker)
	})
	t.Logf("breaker open: %v; server hits %d", took, tripped.Hits())
	if got := tripped.Hits(); got != 1 {
		t.Errorf("leak-tripped server hits = %d, want 1", got)
	}

	c = r.MustClient("leak-full")
	held := resilGo(c, "/held", resilBound)
	resilWaitParked(t, gate, 1)
	took = resilHammer(t, "bulkhead full", n, workers, func(int) error {
		res := get(c, resilBound)
		if !errors.Is(res.err, bulkhead.ErrFull) {
			return fmt.Errorf("%v, want ErrFull", res)
		}
		return resilWantOp(res.err, "leak-full", observe.OpBulkhead)
	})
	gate.Release()
	if res := resilRecv(t, held, resilBound); res.err != nil || res.status != http.StatusOK {
		t.Fatalf("held call: %v, want 200", res)
	}
	t.Logf("bulkhead full: %v; server requests %d", took, full.Requests())

	c = r.MustClient("leak-spent")
	took = resilHammer(t, "budget spent", n, workers, func(int) error {
		// 50ms left is less than the 100ms reserve.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res := resilGetCtx(ctx, c, "/fail")
		if !errors.Is(res.err, capbudget.ErrExhausted) {
			return fmt.Errorf("%v, want capbudget.ErrExhausted", res)
		}
		return resilWantOp(res.err, "leak-spent", observe.OpBudget)
	})
	t.Logf("budget spent: %v; storm server requests still %d", took, storm.Requests())

	for _, st := range r.Status() {
		if st.InFlight != 0 {
			t.Errorf("%s: %d permits still held", st.System, st.InFlight)
		}
	}
	calls := time.Since(start)

	// Close the registry (idle connections), then wait for the
	// goroutines and descriptors to come back to their baseline.
	_ = r.Close()
	var g1, fd1 int
	deadline := time.Now().Add(resilBound)
	for {
		g1, fd1 = runtime.NumGoroutine(), testutil.CheckFDs(t)
		if g1 <= g0+2 && (fd0 == 0 || fd1 <= fd0+4) {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("after %v: %d goroutines (baseline %d), %d descriptors (baseline %d)\n%s",
				resilBound, g1, g0, fd1, fd0, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("7 x %d failing calls at %d in flight in %v; goroutines %d -> %d, descriptors %d -> %d",
		n, workers, calls.Round(time.Millisecond), g0, g1, fd0, fd1)
}
