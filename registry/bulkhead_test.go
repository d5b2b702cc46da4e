package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// resilGateMux serves paths under /gate/ from gate and everything else
// with 200 "ok" at once.
func resilGateMux(gate *outboundtest.Hang) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/gate/") {
			gate.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Length", "2")
		_, _ = io.WriteString(w, "ok")
	})
}

// resilWantFull checks that res is a fast bulkhead rejection of system.
func resilWantFull(t *testing.T, res resilResult, system string) {
	t.Helper()
	if !errors.Is(res.err, bulkhead.ErrFull) {
		t.Fatalf("%v, want bulkhead.ErrFull", res)
	}
	e := resilAsError(t, res.err)
	if e.System != system || e.Op != observe.OpBulkhead || e.Attempts != 0 {
		t.Fatalf("Error{System %q, Op %q, Attempts %d}, want %s, bulkhead, 0", e.System, e.Op, e.Attempts, system)
	}
}

// MAX_CONCURRENT=5 with no wait: of 50 concurrent calls 5 run, 45 are
// refused at once without I/O, and every permit comes back.
func TestBulkheadRejectsBeyondCapacity(t *testing.T) {
	t.Parallel()
	gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	srv := outboundtest.NewUpstream(t, gate)
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":      "inv",
		"INV_BASE_URL":          srv.URL,
		"INV_MAX_CONCURRENT":    "5",
		"INV_BULKHEAD_MAX_WAIT": "0",
	})
	defer r.Close()
	c := r.MustClient("inv")

	const calls, capacity = 50, 5
	results := make(chan resilResult, calls)
	for range calls {
		go func() { results <- resilGet(c, "/x", resilBound) }()
	}
	// With the gate shut no permit comes back, so exactly 45 calls must
	// fail, and fail without waiting for anything.
	for i := range calls - capacity {
		res := resilRecv(t, results, resilBound)
		resilWantFull(t, res, "inv")
		if res.took > 2*time.Second {
			t.Fatalf("rejection %d took %v, want at once", i+1, res.took)
		}
	}
	resilWaitParked(t, gate, capacity)
	st := c.Status()
	if st.InFlight != capacity || st.BulkheadRefused != calls-capacity || st.Capacity != capacity {
		t.Fatalf("while saturated: in flight %d, rejected %d, capacity %d; want %d, %d, %d",
			st.InFlight, st.BulkheadRefused, st.Capacity, capacity, calls-capacity, capacity)
	}
	select {
	case res := <-results:
		t.Fatalf("a 46th call ended while the gate is shut: %v", res)
	default:
	}
	gate.Release()
	for i := range capacity {
		if res := resilRecv(t, results, resilBound); res.err != nil || res.status != http.StatusOK {
			t.Fatalf("admitted call %d: %v, want 200", i+1, res)
		}
	}
	if got := srv.Requests(); got != capacity {
		t.Fatalf("server requests = %d, want %d (rejected calls cost no I/O)", got, capacity)
	}
	if got := srv.MaxInFlight(); got > capacity {
		t.Fatalf("server max active = %d, want <= %d", got, capacity)
	}
	testutil.Eventually(t, resilBound, "in flight back to 0", func() bool { return c.Status().InFlight == 0 })
	st = c.Status()
	if st.Calls != capacity || st.OK != capacity {
		t.Fatalf("status calls %d, ok %d; want %d, %d", st.Calls, st.OK, capacity, capacity)
	}
	t.Logf("server: %d requests, max active %d, %d conns; %d rejected", srv.Requests(), srv.MaxInFlight(), srv.Conns(), st.BulkheadRefused)
}

// With BULKHEAD_MAX_WAIT calls queue for a permit and get through once one
// frees; a call whose wait passes gets ErrFull.
func TestBulkheadWaitsForPermit(t *testing.T) {
	t.Parallel()
	t.Run("waiters get through", func(t *testing.T) {
		gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
		srv := outboundtest.NewUpstream(t, gate)
		r := loadRegistry(t, map[string]string{
			"OUTBOUND_SYSTEMS":      "inv",
			"INV_BASE_URL":          srv.URL,
			"INV_MAX_CONCURRENT":    "2",
			"INV_BULKHEAD_MAX_WAIT": "2s",
		})
		defer r.Close()
		c := r.MustClient("inv")

		const calls, capacity = 6, 2
		results := make(chan resilResult, calls)
		for range calls {
			go func() { results <- resilGet(c, "/x", resilBound) }()
		}
		resilWaitParked(t, gate, capacity)
		if st := c.Status(); st.InFlight != capacity {
			t.Fatalf("in flight %d, want %d", st.InFlight, capacity)
		}
		select {
		case res := <-results:
			t.Fatalf("a call ended while every permit is held and the wait is 2s: %v", res)
		default:
		}
		gate.Release()
		for i := range calls {
			if res := resilRecv(t, results, resilBound); res.err != nil || res.status != http.StatusOK {
				t.Fatalf("call %d: %v, want 200", i+1, res)
			}
		}
		if got := srv.Requests(); got != calls {
			t.Fatalf("server requests = %d, want %d", got, calls)
		}
		if got := srv.MaxInFlight(); got > capacity {
			t.Fatalf("server max active = %d, want <= %d", got, capacity)
		}
		st := c.Status()
		if st.InFlight != 0 || st.BulkheadRefused != 0 || st.Calls != calls {
			t.Fatalf("status: in flight %d, rejected %d, calls %d; want 0, 0 (no call was refused), %d",
				st.InFlight, st.BulkheadRefused, st.Calls, calls)
		}
	})
	t.Run("wait passes", func(t *testing.T) {
		gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
		srv := outboundtest.NewUpstream(t, gate)
		const maxWait = 200 * time.Millisecond
		r := loadRegistry(t, map[string]string{
			"OUTBOUND_SYSTEMS":      "inv",
			"INV_BASE_URL":          srv.URL,
			"INV_MAX_CONCURRENT":    "1",
			"INV_BULKHEAD_MAX_WAIT": maxWait.String(),
		})
		defer r.Close()
		c := r.MustClient("inv")

		held := resilGo(c, "/x", resilBound)
		resilWaitParked(t, gate, 1)
		res := resilGet(c, "/x", resilBound)
		resilWantFull(t, res, "inv")
		if res.took < maxWait/2 {
			t.Fatalf("rejected after %v, want after waiting about %v", res.took, maxWait)
		}
		// A caller whose context ends first gets an error matching both
		// ErrFull and its context's error.
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan resilResult, 1)
		go func() { ch <- resilGetCtx(ctx, c, "/x") }()
		cancel()
		res = resilRecv(t, ch, resilBound)
		if !errors.Is(res.err, bulkhead.ErrFull) && !errors.Is(res.err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v, want ErrFull and/or context.Canceled", res)
		}
		gate.Release()
		if res := resilRecv(t, held, resilBound); res.err != nil || res.status != http.StatusOK {
			t.Fatalf("held call: %v, want 200", res)
		}
		if got := srv.Requests(); got != 1 {
			t.Fatalf("server requests = %d, want 1", got)
		}
		if st := c.Status(); st.InFlight != 0 {
			t.Fatalf("in flight %d, want 0", st.InFlight)
		}
	})
}

// A caller that never closes a body holds its permit no longer than the
// call's deadline; closing that body late does not give back a permit it
// no longer holds.
func TestBulkheadForgottenBodyReleasedAtDeadline(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusOK, Body: "hello"})
	const callTimeout = 1700 * time.Millisecond
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":          "inv",
		"INV_BASE_URL":              srv.URL,
		"INV_CONNECT_TIMEOUT":       "100ms",
		"INV_TLS_HANDSHAKE_TIMEOUT": "500ms",
		"INV_READ_TIMEOUT":          "500ms",
		"INV_CALL_TIMEOUT":          callTimeout.String(),
		"INV_MAX_CONCURRENT":        "1",
		"INV_BULKHEAD_MAX_WAIT":     "0",
	})
	defer r.Close()
	c := r.MustClient("inv")

	start := time.Now()
	forgotten := resilOpen(t, c, "/x") // body deliberately left open until the end
	if forgotten.StatusCode != http.StatusOK {
		t.Fatalf("first call: status %d, want 200", forgotten.StatusCode)
	}
	if st := c.Status(); st.InFlight != 1 {
		t.Fatalf("in flight with the body open = %d, want 1", st.InFlight)
	}
	resilWantFull(t, resilGet(c, "/x", resilBound), "inv")

	testutil.Eventually(t, callTimeout+5*time.Second, "forgotten permit released", func() bool {
		return c.Status().InFlight == 0
	})
	held := time.Since(start)
	if held < callTimeout/2 {
		t.Fatalf("the permit came back after %v, before the call's deadline (%v)", held, callTimeout)
	}
	if res := resilGet(c, "/x", resilBound); res.err != nil || res.status != http.StatusOK {
		t.Fatalf("call after the deadline: %v, want 200", res)
	}

	// Another call holds the only permit while the forgotten body is
	// finally closed: that Close must not free the other call's permit.
	holder := resilOpen(t, c, "/x")
	n, rerr := io.Copy(io.Discard, forgotten.Body)
	if err := forgotten.Body.Close(); err != nil {
		t.Logf("closing the forgotten body: %v", err)
	}
	t.Logf("reading the forgotten body after its deadline: %d bytes, %v", n, rerr)
	if st := c.Status(); st.InFlight != 1 {
		t.Fatalf("in flight after the late Close = %d, want 1 (the holder's)", st.InFlight)
	}
	resilWantFull(t, resilGet(c, "/x", resilBound), "inv")
	if err := holder.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(); st.InFlight != 0 {
		t.Fatalf("in flight at the end = %d, want 0", st.InFlight)
	}
	t.Logf("permit held %v by a body never closed (CALL_TIMEOUT %v); server requests %d, conns %d",
		held.Round(time.Millisecond), callTimeout, srv.Requests(), srv.Conns())
}

// The permit goes back exactly once: at EOF, and not again at Close, nor at
// a second Close. Another call holds the second permit meanwhile, so that a
// second release would show (it would free that call's permit).
func TestBulkheadPermitReleasedOnce(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"eof", "eof+close", "eof+close+close", "close", "close+close"} {
		t.Run(how, func(t *testing.T) {
			gate := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
			srv := outboundtest.NewUpstream(t, resilGateMux(gate))
			r := loadRegistry(t, map[string]string{
				"OUTBOUND_SYSTEMS":      "inv",
				"INV_BASE_URL":          srv.URL,
				"INV_MAX_CONCURRENT":    "2",
				"INV_BULKHEAD_MAX_WAIT": "0",
			})
			defer r.Close()
			c := r.MustClient("inv")

			resp := resilOpen(t, c, "/ok")
			defer resp.Body.Close()
			parked := resilGo(c, "/gate/1", resilBound)
			resilWaitParked(t, gate, 1)
			if st := c.Status(); st.InFlight != 2 {
				t.Fatalf("in flight = %d, want 2", st.InFlight)
			}
			if strings.HasPrefix(how, "eof") {
				b, err := io.ReadAll(resp.Body)
				if err != nil || string(b) != "ok" {
					t.Fatalf("body %q, %v; want \"ok\"", b, err)
				}
				// A further read at EOF must not release again.
				if n, err := resp.Body.Read(make([]byte, 1)); n != 0 || err != io.EOF {
					t.Fatalf("read after EOF = %d, %v; want 0, EOF", n, err)
				}
			}
			for range strings.Count(how, "close") {
				if err := resp.Body.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			if st := c.Status(); st.InFlight != 1 {
				t.Fatalf("in flight after %s = %d, want 1 (the parked call's)", how, st.InFlight)
			}
			// Exactly one permit is free: one more call fits, the
			// next is refused.
			second := resilGo(c, "/gate/2", resilBound)
			resilWaitParked(t, gate, 2)
			resilWantFull(t, resilGet(c, "/ok", resilBound), "inv")
			gate.Release()
			for _, ch := range []<-chan resilResult{parked, second} {
				if res := resilRecv(t, ch, resilBound); res.err != nil || res.status != http.StatusOK {
					t.Fatalf("parked call: %v, want 200", res)
				}
			}
			if err := resp.Body.Close(); err != nil {
				t.Fatalf("final Close: %v", err)
			}
			st := c.Status()
			if st.InFlight != 0 || st.Calls != 3 || st.BulkheadRefused != 1 {
				t.Fatalf("at the end: in flight %d, calls %d, rejected %d; want 0, 3, 1", st.InFlight, st.Calls, st.BulkheadRefused)
			}
		})
	}
}

// A caller that cancels while waiting for a permit gets its own
// cancellation, not bulkhead.ErrFull, and no rejection is counted.
func TestBulkheadWaitCancelledIsNotARejection(t *testing.T) {
	t.Parallel()
	gate := outboundtest.NewHang(outboundtest.Reply{Body: "ok"})
	srv := outboundtest.NewUpstream(t, gate)
	c := tbrClient(t, srv.URL, tbrFast("MAX_CONCURRENT", "1", "BULKHEAD_MAX_WAIT", "2s"))
	held := holdPermit(t, c, gate)
	ctx, cancel := context.WithCancel(tbrCtx(t, 5*time.Second))
	time.AfterFunc(50*time.Millisecond, cancel)
	_, _, err := tbrGet(t, ctx, c, "/x")
	e := tbrError(t, err, observe.OpCanceled)
	if errors.Is(err, bulkhead.ErrFull) || !errors.Is(err, context.Canceled) {
		t.Errorf("%v: want context.Canceled, not bulkhead.ErrFull", e)
	}
	if st := c.Status(); st.BulkheadRefused != 0 {
		t.Errorf("BulkheadRefused = %d, want 0", st.BulkheadRefused)
	}
	gate.Release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

// BULKHEAD_MAX_WAIT counts against CALL_TIMEOUT: a call that waited for a
// permit ends within CALL_TIMEOUT of its start, not the wait plus it.
func TestBulkheadWaitCountsAgainstCallTimeout(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/hold", outboundtest.Trickle(time.Hour)) // headers, then a body that never ends
	mux.Handle("/hang", outboundtest.NewHang(nil))
	srv := outboundtest.NewUpstream(t, mux)
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL,
		"INV_MAX_CONCURRENT": "1", "INV_BULKHEAD_MAX_WAIT": "3s", "INV_RETRIES": "0",
		"INV_CONNECT_TIMEOUT": "100ms", "INV_TLS_HANDSHAKE_TIMEOUT": "100ms",
		"INV_READ_TIMEOUT": "2s", "INV_CALL_TIMEOUT": "3100ms",
	})
	defer r.Close()
	c := r.MustClient("inv")

	// The first call gets its headers and never closes the body: it holds
	// the only permit until its deadline, 2.1s - 100ms reserve = 2s.
	ctx, cancel := context.WithTimeout(context.Background(), 2100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/hold", nil)
	held, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()

	// The second call waits ~2s for the permit, then its attempt hangs.
	// Its deadline started with the call: it ends at CALL_TIMEOUT (3.1s),
	// not at wait + READ_TIMEOUT (4s) or wait + CALL_TIMEOUT (5.1s).
	res := resilGet(c, "/hang", resilBound)
	e := resilAsError(t, res.err)
	if e.Op != observe.OpCallTimeout || res.took > 3600*time.Millisecond {
		t.Fatalf("second call: Op %q after %v (%v); want call timeout within CALL_TIMEOUT 3.1s of its start", e.Op, res.took, res.err)
	}
}
