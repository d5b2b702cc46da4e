package registry

// Regression tests for the findings of the first code review: each one
// failed before its fix.

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// Do's errors come wrapped in *url.Error by http.Client, which strips
// only the password: a token in the user name or the query must not
// reach the error text.
func TestReviewDoErrorRedactsURL(t *testing.T) {
	addr := testutil.RefusedAddr(t)
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv",
		"INV_BASE_URL":     "http://tok3n@" + addr + "/v1?api_key=SECRET1",
		"INV_RETRIES":      "0",
	})
	defer r.Close()
	c := r.MustClient("inv")
	res := resilGet(c, "/x?access_token=SECRET2", resilBound)
	if res.err == nil {
		t.Fatal("call to a refused port succeeded")
	}
	for _, secret := range []string{"tok3n", "SECRET1", "SECRET2"} {
		if strings.Contains(res.err.Error(), secret) {
			t.Errorf("error leaks %q: %v", secret, res.err)
		}
	}
}

// A request net/http refuses before any I/O (an invalid header value) is
// the caller's bug: it is not retried and does not open the breaker.
func TestReviewBadRequestDoesNotOpenBreaker(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":         "inv",
		"INV_BASE_URL":             srv.URL,
		"INV_BREAKER_MIN_REQUESTS": "2",
		"INV_BACKOFF_BASE":         "1ms",
		"INV_BACKOFF_MAX":          "1ms",
	})
	defer r.Close()
	c := r.MustClient("inv")
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/x", nil)
		req.Header.Set("X-Bad", "a\nb")
		_, err := c.Do(req)
		cancel()
		if e := resilAsError(t, err); e.Op != observe.OpRequest || e.Attempts != 1 {
			t.Fatalf("Op %q after %d attempts (%v), want request after 1", e.Op, e.Attempts, err)
		}
	}
	if st := c.Status(); st.Breaker != observe.BreakerClosed || st.BreakerCounts.Failures != 0 || st.Retries != 0 {
		t.Fatalf("breaker %s, counts %+v, retries %d; want closed, no failures, no retries", st.Breaker, st.BreakerCounts, st.Retries)
	}
	if res := resilGet(c, "/ok", resilBound); res.err != nil || res.status != 200 {
		t.Fatalf("good call after bad ones: %v", res)
	}
}

// Every caller brings a short budget (as with X-Time-Budget) and the
// upstream hangs: the attempts the budgets cut are attempt timeouts, and
// the breaker opens, so later calls fail fast instead of each waiting.
func TestBreakerOpensWhenBudgetsCutAHungUpstream(t *testing.T) {
	srv := outboundtest.NewUpstream(t, outboundtest.NewHang(nil))
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":          "inv",
		"INV_BASE_URL":              srv.URL,
		"INV_BREAKER_MIN_REQUESTS":  "3",
		"INV_BREAKER_FAILURE_RATIO": "0.5",
		"INV_BREAKER_OPEN_TIMEOUT":  "1h",
	})
	defer r.Close()
	c := r.MustClient("inv")
	for i := range 3 {
		res := resilGet(c, "/hang", 400*time.Millisecond) // 300ms after the reserve
		if e := resilAsError(t, res.err); e.Op != observe.OpBudgetTimeout {
			t.Fatalf("call %d: Op %q (%v), want budget timeout", i+1, e.Op, res.err)
		}
	}
	if st := c.Status(); st.Breaker != observe.BreakerOpen {
		t.Fatalf("breaker %s after 3 budget-cut attempts on a hung upstream, counts %+v; want open", st.Breaker, st.BreakerCounts)
	}
	res := resilGet(c, "/hang", 400*time.Millisecond)
	if !errors.Is(res.err, ErrCircuitOpen) || res.took > 100*time.Millisecond {
		t.Fatalf("call after the breaker opened: %v, want ErrCircuitOpen at once", res)
	}
}

// A small body closed unread is drained, so its connection is reused.
func TestReviewSmallBodyClosedUnreadReusesConnection(t *testing.T) {
	srv := outboundtest.NewUpstream(t, outboundtest.NewScript(outboundtest.Reply{Body: strings.Repeat("x", 2048)}))
	r := resilRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL})
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
	if n := srv.Conns(); n != 1 {
		t.Fatalf("20 calls whose small bodies were closed unread opened %d connections, want 1", n)
	}
}

// A response without a body (204, HEAD) gives its permit back at once,
// even if the caller never closes it.
func TestReviewNoBodyReleasesPermit(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusNoContent})
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL, "INV_MAX_CONCURRENT": "1",
	})
	defer r.Close()
	c := r.MustClient("inv")
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		req, _ := http.NewRequestWithContext(ctx, http.MethodHead, "/x", nil)
		resp, err := c.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v (a body-less response kept the only permit)", i+1, err)
		}
		_ = resp // never closed
	}
	if n := c.Status().InFlight; n != 0 {
		t.Fatalf("InFlight %d after body-less responses, want 0", n)
	}
}

// HTTPClient() sends BASE_URL's userinfo as Basic auth, as Do does.
func TestReviewHTTPClientBasicAuthFromBaseURL(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv",
		"INV_BASE_URL":     strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1),
	})
	defer r.Close()
	c := r.MustClient("inv")
	res := resilGet(c, "/do", resilBound)
	if res.err != nil {
		t.Fatal(res.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resilBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/sdk", nil)
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for _, got := range srv.Received() {
		if u, p, ok := (&http.Request{Header: got.Header}).BasicAuth(); !ok || u != "alice" || p != "s3cret" {
			t.Errorf("%s: basic auth %q %q %v, want alice s3cret", got.Path, u, p, ok)
		}
	}
	if hc := c.HTTPClient(); hc == c.HTTPClient() {
		t.Error("HTTPClient returns one shared *http.Client: a library that sets its Timeout changes it for everyone")
	}
}

// BULKHEAD_MAX_WAIT counts against CALL_TIMEOUT: a call that waited for a
// permit ends within CALL_TIMEOUT of its start, not the wait plus it.
func TestReviewBulkheadWaitInsideCallTimeout(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/hold", outboundtest.Trickle(time.Hour)) // headers, then a body that never ends
	mux.Handle("/hang", outboundtest.NewHang(nil))
	srv := outboundtest.NewUpstream(t, mux)
	r := resilRegistry(t, map[string]string{
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

// OMIT_TIME_BUDGET=true sends no X-Time-Budget (third parties); by
// default every attempt, first and retried, carries one.
func TestOmitTimeBudget(t *testing.T) {
	for _, omit := range []bool{false, true} {
		srv := testutil.Script(t, outboundtest.Reply{Status: 503}, outboundtest.Reply{Body: "ok"})
		env := map[string]string{
			"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL,
			"INV_BACKOFF_BASE": "1ms", "INV_BACKOFF_MAX": "1ms",
		}
		if omit {
			env["INV_OMIT_TIME_BUDGET"] = "true"
		}
		r := resilRegistry(t, env)
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

// A relative path whose ".." would climb above BASE_URL's path is refused
// before any I/O; ".." that stays inside is sent.
func TestReviewPathEscapingBaseRefused(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	r := resilRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL + "/v1"})
	defer r.Close()
	c := r.MustClient("inv")
	for _, p := range []string{"/stock/../../admin", "../x", "a/../../b", "/..;/admin", `/..\admin`} {
		res := resilGet(c, p, resilBound)
		if !errors.Is(res.err, ErrPathEscapesBase) {
			t.Errorf("%s: %v, want ErrPathEscapesBase", p, res)
		}
	}
	if n := srv.Hits(); n != 0 {
		t.Fatalf("server saw %d requests, want 0", n)
	}
	if res := resilGet(c, "/stock/a/../42", resilBound); res.err != nil || res.status != 200 {
		t.Fatalf("a path that stays inside: %v", res)
	}
}

// Over HTTP/2 too (its empty body is not http.NoBody), a response without
// a body gives its permit back at once, even if never closed.
func TestReviewNoBodyReleasesPermitHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/empty" {
			w.Header().Set("Content-Length", "0")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	caFile := testutil.WriteFile(t, t.TempDir(), "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	r := resilRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL, "INV_MAX_CONCURRENT": "1", "INV_TLS_CA_FILE": caFile,
	})
	defer r.Close()
	c := r.MustClient("inv")
	for i, m := range []struct{ method, path string }{{"HEAD", "/x"}, {"GET", "/204"}, {"GET", "/empty"}, {"GET", "/204"}} {
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		req, _ := http.NewRequestWithContext(ctx, m.method, m.path, nil)
		resp, err := c.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("call %d (%s %s): %v (a body-less HTTP/2 response kept the only permit)", i+1, m.method, m.path, err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("call %d: HTTP/%d, want HTTP/2", i+1, resp.ProtoMajor)
		}
		// never closed
	}
	if n := c.Status().InFlight; n != 0 {
		t.Fatalf("InFlight %d after body-less HTTP/2 responses, want 0", n)
	}
	c.HTTPClient().CloseIdleConnections()
}

// Close drains a small unread body, but not for longer than a moment: an
// upstream that stalls mid-body must not hold the caller's Close until
// CALL_TIMEOUT.
func TestReviewCloseDoesNotWaitForAStalledBody(t *testing.T) {
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		_, _ = io.WriteString(w, "0123456789")
		w.(http.Flusher).Flush()
		outboundtest.Wait(r, time.Hour) // stalls until the client goes away
	}))
	r := resilRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL, "INV_CALL_TIMEOUT": "15s"})
	defer r.Close()
	c := r.MustClient("inv")
	ctx, cancel := context.WithTimeout(context.Background(), resilBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/stall", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp.Body.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v on a stalled body, want about 50ms", took)
	}
	if n := c.Status().InFlight; n != 0 {
		t.Fatalf("InFlight %d after Close, want 0", n)
	}
}
