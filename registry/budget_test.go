package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// A caller with 300ms left gets a call bounded by 300ms - 100ms reserve,
// far below CALL_TIMEOUT, and an error that says the budget ran out.
func TestBudgetCallerDeadlineCapsCall(t *testing.T) {
	t.Parallel()
	var maxBudget atomic.Int64 // the largest X-Time-Budget seen, in ms
	slow := outboundtest.NewHang(nil)
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, err := capbudget.ParseHeader(r.Header.Get(capbudget.Header)); err == nil {
			for ms := d.Milliseconds(); ; {
				cur := maxBudget.Load()
				if ms <= cur || maxBudget.CompareAndSwap(cur, ms) {
					break
				}
			}
		} else {
			maxBudget.Store(1 << 40) // a missing header fails below
		}
		slow.ServeHTTP(w, r)
	}))
	c := tbrClient(t, srv.URL, map[string]string{
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "3s", "READ_TIMEOUT": "3s", "CALL_TIMEOUT": "5s",
	})
	// Ending early is a bug every time; ending late may be a stall of a
	// loaded machine, so only three late runs in a row fail.
	var late []time.Duration
	for run := 1; run <= 3; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, elapsed, err := tbrGet(t, ctx, c, "/")
		cancel()
		t.Logf("run %d: budget timeout after %v: %v (errors.Is DeadlineExceeded: %v)",
			run, elapsed, err, errors.Is(err, context.DeadlineExceeded))
		tbrTimeout(t, err, observe.OpBudgetTimeout, 1)
		// ErrExhausted is the cause of the capped deadline only: had the
		// caller's own deadline fired first, the cause would be
		// context.DeadlineExceeded.
		if !errors.Is(err, capbudget.ErrExhausted) {
			t.Fatalf("error does not match capbudget.ErrExhausted: %v", err)
		}
		if elapsed < 150*time.Millisecond {
			t.Fatalf("call ended after %v, want ~200ms (caller's 300ms - 100ms reserve)", elapsed)
		}
		if elapsed < 290*time.Millisecond {
			late = nil
			break
		}
		late = append(late, elapsed)
	}
	if len(late) > 0 {
		t.Errorf("calls ended after %v, want ~200ms (< 290ms; caller's 300ms - 100ms reserve)", late)
	}
	if st := c.Status(); st.BudgetCapped == 0 || st.BudgetCapped != st.Calls {
		t.Errorf("Status(): BudgetCapped = %d, Calls = %d; want every call capped", st.BudgetCapped, st.Calls)
	}
	// Each attempt told the server the budget it had: at most 200ms.
	if n := srv.Requests(); n == 0 || n != int64(c.Status().Calls) {
		t.Errorf("server saw %d requests for %d calls", n, c.Status().Calls)
	}
	if ms := maxBudget.Load(); ms > 200 || ms <= 0 {
		t.Errorf("server saw %s up to %dms, want (0, 200ms]", capbudget.Header, ms)
	}
}

// A budget already spent (less than the reserve left, or past) fails fast:
// no request reaches the server and the rejection allocates only its error.
func TestBudgetSpentFailsFast(t *testing.T) {
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c := tbrClient(t, srv.URL, nil)

	for _, tc := range []struct {
		name string
		left time.Duration
	}{
		{"less than the reserve", 50 * time.Millisecond},
		{"past", -time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.left)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if resp != nil {
				resp.Body.Close()
				t.Fatalf("got a response (%d), want none", resp.StatusCode)
			}
			tbrError(t, err, observe.OpBudget)
			if !errors.Is(err, capbudget.ErrExhausted) {
				t.Errorf("error does not match capbudget.ErrExhausted: %v", err)
			}
			// One allocation: the caller's own *Error (no error value
			// is shared between calls).
			if allocs := testing.AllocsPerRun(100, func() { _, _ = c.Do(req) }); allocs > 1 {
				t.Errorf("a spent-budget rejection allocates %v times, want at most 1", allocs)
			}
		})
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
	if st := c.Status(); st.BudgetRefused < 2 || st.Calls != 0 {
		t.Errorf("Status(): BudgetRefused = %d, Calls = %d; want >= 2, 0", st.BudgetRefused, st.Calls)
	}
}

// Every attempt carries X-Time-Budget: the time left before the call's
// deadline, smaller at each retry by at least the time the previous
// attempt took. The caller's request is not modified.
func TestBudgetHeaderPerAttempt(t *testing.T) {
	t.Parallel()
	const delay = 30 * time.Millisecond
	srv := testutil.Script(t,
		outboundtest.Reply{Status: http.StatusServiceUnavailable, Delay: delay},
		outboundtest.Reply{Status: http.StatusServiceUnavailable, Delay: delay},
		outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	c := tbrClient(t, srv.URL, map[string]string{
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "1s", "READ_TIMEOUT": "1s", "CALL_TIMEOUT": "5s",
		"RETRIES": "2", "BACKOFF_BASE": "10ms", "BACKOFF_MAX": "20ms",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if v := req.Header.Get(capbudget.Header); v != "" {
		t.Errorf("the caller's request got %s: %s", capbudget.Header, v)
	}
	got := srv.Received()
	if len(got) != 3 {
		t.Fatalf("server saw %d requests, want 3", len(got))
	}
	var budgets []time.Duration
	for i, r := range got {
		b, err := capbudget.ParseHeader(r.Header.Get(capbudget.Header))
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		budgets = append(budgets, b)
	}
	t.Logf("X-Time-Budget per attempt: %v", budgets)
	// The caller has 2s; the call keeps 100ms back.
	if budgets[0] > 1900*time.Millisecond || budgets[0] < time.Second {
		t.Errorf("first attempt's budget %v, want just under 1.9s (2s - 100ms reserve)", budgets[0])
	}
	for i := 1; i < len(budgets); i++ {
		// Each attempt took at least delay; whole-millisecond
		// truncation may take 1ms off the difference.
		if d := budgets[i-1] - budgets[i]; d < delay-time.Millisecond {
			t.Errorf("budget went from %v to %v at attempt %d, want a decrease of >= %v", budgets[i-1], budgets[i], i+1, delay)
		}
	}
}

// Without a caller deadline the header carries what is left of CALL_TIMEOUT.
func TestBudgetHeaderFromCallTimeout(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, map[string]string{
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "1s", "READ_TIMEOUT": "1s", "CALL_TIMEOUT": "5s",
	})
	// No caller deadline: CALL_TIMEOUT alone bounds the call.
	resp, _, err := tbrGet(t, context.Background(), c, "/")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	resp.Body.Close()
	b, err := capbudget.ParseHeader(srv.Received()[0].Header.Get(capbudget.Header))
	if err != nil {
		t.Fatal(err)
	}
	if b > 5*time.Second || b < 4*time.Second {
		t.Errorf("budget %v, want just under CALL_TIMEOUT 5s", b)
	}
}

// Service A, behind capbudget.Middleware, calls service B through a
// registry client with its request's context: the budget A was given
// shrinks by at least the reserve on its way to B.
func TestBudgetPropagatesThroughMiddleware(t *testing.T) {
	t.Parallel()
	var callB *Client // set once the registry is built, before any request
	seenB := make(chan time.Duration, 1)
	b := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := capbudget.ParseHeader(r.Header.Get(capbudget.Header))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		seenB <- d
		io.WriteString(w, "b")
	}))
	seenA := make(chan time.Duration, 1)
	a := outboundtest.NewUpstream(t, capbudget.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := capbudget.ParseHeader(r.Header.Get(capbudget.Header))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		seenA <- d
		if _, ok := r.Context().Deadline(); !ok {
			http.Error(w, "middleware set no deadline", http.StatusInternalServerError)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/", nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := callB.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(w, "a+%s", body)
	})))

	r := loadRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "svc-a,svc-b", "SVC_A_BASE_URL": a.URL, "SVC_B_BASE_URL": b.URL})
	callB = r.MustClient("svc-b")

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.MustClient("svc-a").Do(req)
	if err != nil {
		t.Fatalf("call to A: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "a+b" {
		t.Fatalf("A answered %d %q (%v), want 200 \"a+b\"", resp.StatusCode, body, err)
	}
	budgetA, budgetB := <-seenA, <-seenB
	t.Logf("X-Time-Budget: A saw %v, B saw %v", budgetA, budgetB)
	if budgetA > 900*time.Millisecond {
		t.Errorf("A saw %v, want <= 900ms (1s - 100ms reserve)", budgetA)
	}
	if budgetB > budgetA-capbudget.DefaultReserve {
		t.Errorf("B saw %v, want <= A's %v - %v reserve", budgetB, budgetA, capbudget.DefaultReserve)
	}
	if budgetB <= 0 {
		t.Errorf("B saw %v, want a positive budget", budgetB)
	}
}

// OMIT_TIME_BUDGET=true sends no X-Time-Budget (third parties); by
// default every attempt, first and retried, carries one.
func TestTimeBudgetOnEveryAttemptUnlessOmitted(t *testing.T) {
	t.Parallel()
	for _, omit := range []bool{false, true} {
		srv := testutil.Script(t, outboundtest.Reply{Status: 503}, outboundtest.Reply{Body: "ok"})
		env := map[string]string{
			"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL,
			"INV_BACKOFF_BASE": "1ms", "INV_BACKOFF_MAX": "1ms",
		}
		if omit {
			env["INV_OMIT_TIME_BUDGET"] = "true"
		}
		r := loadRegistry(t, env)
		res := resilGet(r.MustClient("inv"), "/x", resilBound)
		r.Close()
		if res.err != nil || res.status != 200 {
			t.Fatalf("omit=%v: %v", omit, res)
		}
		got := srv.Received()
		if len(got) != 2 {
			t.Fatalf("omit=%v: %d requests, want 2", omit, len(got))
		}
		for i, rq := range got {
			if v := rq.Header.Get("X-Time-Budget"); (v == "") != omit {
				t.Errorf("omit=%v: attempt %d X-Time-Budget %q", omit, i+1, v)
			}
		}
	}
}

// With OMIT_TIME_BUDGET the system never receives X-Time-Budget, not even
// one the caller set, on any attempt of either entry point.
func TestOmitTimeBudgetStripsTheCallersHeader(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable}, outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("OMIT_TIME_BUDGET", "true", "RETRIES", "1"))
	for _, do := range []func(*http.Request) (*http.Response, error){c.Do, c.HTTPClient().Do} {
		req, _ := http.NewRequestWithContext(tbrCtx(t, 5*time.Second), http.MethodGet, "/", nil)
		req.Header.Set("X-Time-Budget", "3600000")
		resp, err := do(req)
		if err != nil {
			t.Fatal(err)
		}
		tbrRead(t, resp)
		if req.Header.Get("X-Time-Budget") != "3600000" {
			t.Errorf("the caller's request was changed")
		}
	}
	for _, r := range srv.Received() {
		if v, ok := r.Header["X-Time-Budget"]; ok {
			t.Errorf("request %d carried X-Time-Budget %q", r.Seq, v)
		}
	}
}

// Each call's attempts carry that call's headers and X-Time-Budget and
// never another's, however many calls run at once, and the Request of each
// answer stays the call's own after its body is closed and other calls
// have run: the attempts' header maps are reused, the answers' never.
func TestBudgetHeaderIsEachCallsOwn(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Call")
		if len(r.Header.Values("X-Call")) != 1 || r.Header.Get("X-Only-"+id) != id {
			http.Error(w, fmt.Sprintf("headers of another call: %v", r.Header), http.StatusBadRequest)
			return
		}
		if _, err := capbudget.ParseHeader(r.Header.Get(capbudget.Header)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, id)
	}))
	c := tbrClient(t, srv.URL, map[string]string{"MAX_CONCURRENT": "8"})
	const workers, calls = 8, 25
	answers := make([][]*http.Request, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				id := strconv.Itoa(w*calls + i)
				req, err := http.NewRequestWithContext(tbrCtx(t, 5*time.Second), http.MethodGet, "/item/"+id, nil)
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("X-Call", id)
				req.Header.Set("X-Only-"+id, id)
				resp, err := c.Do(req)
				if err != nil {
					t.Errorf("call %s: %v", id, err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(body) != id {
					t.Errorf("call %s: status %d, body %q", id, resp.StatusCode, body)
				}
				answers[w] = append(answers[w], resp.Request)
			}
		})
	}
	wg.Wait()
	for w, reqs := range answers {
		for i, r := range reqs {
			id := strconv.Itoa(w*calls + i)
			if r.Header.Get("X-Call") != id || len(r.Header) != 2 || r.URL.String() != srv.URL+"/item/"+id {
				t.Errorf("call %s: the answer's Request became %s %v", id, r.URL, r.Header)
			}
		}
	}
}

// A request without a URL is refused as http.Client refuses it, with an
// error naming the system, not a panic.
func TestRequestWithoutURLIsRefused(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, nil)
	req := (&http.Request{Method: http.MethodGet, Header: http.Header{}}).WithContext(tbrCtx(t, 5*time.Second))
	_, err := c.Do(req)
	if e := tbrError(t, err, observe.OpRequest); e.System != tbrSystem {
		t.Errorf("error %v names system %q, want %q", err, e.System, tbrSystem)
	}
	if n := len(srv.Received()); n != 0 {
		t.Errorf("the server saw %d requests, want 0", n)
	}
}
