package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/cause"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// Regression tests for issue 10, named after its items.

// stalledBody answers status with header, a Content-Length of 1000 and 10
// bytes of body, then stalls until the client goes away or the server
// stops.
func stalledBody(status int, header http.Header) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "0123456789")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-outboundtest.Stopped(r):
		}
	})
}

// Item 1: a 503 whose body stalls after the headers is drained for at most
// about 50ms before the retry, not until CALL_TIMEOUT.
func TestIssue10StalledDrainBeforeRetry(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Handler: stalledBody(http.StatusServiceUnavailable, nil)},
		outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "1", "READ_TIMEOUT", "1s", "CALL_TIMEOUT", "3s"))
	resp, took, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do after %v: %v", took, err)
	}
	if resp.StatusCode != http.StatusOK || tbrRead(t, resp) != "ok" {
		t.Fatalf("got status %d, want 200 ok", resp.StatusCode)
	}
	t.Logf("stalled 503, then 200, in %v (CALL_TIMEOUT 3s)", took)
	if srv.Hits() != 2 {
		t.Errorf("server saw %d requests, want 2", srv.Hits())
	}
	if took > 1500*time.Millisecond {
		t.Errorf("took %v: the drain before the retry waited on the stalled body", took)
	}
}

// Item 1, the other drain: giving up because the Retry-After would pass
// the deadline does not wait on a stalled body either.
func TestIssue10StalledDrainBeforeGivingUp(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Handler: stalledBody(http.StatusTooManyRequests, outboundtest.RetryAfterSeconds(5))})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2", "READ_TIMEOUT", "1s", "CALL_TIMEOUT", "3s", "RETRY_AFTER_MAX", "10s"))
	_, took, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	e := tbrError(t, err, observe.OpStatus)
	t.Logf("gave up in %v: %v", took, e)
	if took > 1500*time.Millisecond {
		t.Errorf("took %v: giving up waited on the stalled body", took)
	}
}

// Item 2: a small chunked body closed unread keeps its connection.
func TestIssue10ChunkedBodyClosedUnread(t *testing.T) {
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
	if n := srv.Conns(); n != 1 {
		t.Fatalf("%d calls whose chunked bodies were closed unread opened %d connections, want 1", calls, n)
	}
}

// Item 3: a Retry-After of 2^32 seconds or more is a valid (huge) delay,
// longer than RETRY_AFTER_MAX: the call ends with the response.
func TestIssue10RetryAfterHuge(t *testing.T) {
	for _, v := range []string{"4294967296", "99999999999999999999999"} {
		t.Run(v, func(t *testing.T) {
			srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable,
				Header: http.Header{"Retry-After": {v}}, Body: "busy"})
			c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
			resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || tbrRead(t, resp) != "busy" {
				t.Fatalf("got %d, want the 503", resp.StatusCode)
			}
			if n := srv.Hits(); n != 1 {
				t.Fatalf("server saw %d attempts, want 1 (hint above RETRY_AFTER_MAX)", n)
			}
		})
	}
}

var _ = errors.New

// Item 4: HTTPClient() gives one CALL_TIMEOUT to the whole call, redirects
// included, as http.Client.Timeout does: five hops of 400ms do not fit in
// a CALL_TIMEOUT of 1.7s.
func TestIssue10HTTPClientRedirectsShareCallTimeout(t *testing.T) {
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !outboundtest.Wait(r, 400*time.Millisecond) {
			return
		}
		n := strings.TrimPrefix(r.URL.Path, "/hop/")
		if n == "0" {
			_, _ = io.WriteString(w, "end")
			return
		}
		next := map[string]string{"4": "3", "3": "2", "2": "1", "1": "0"}[n]
		http.Redirect(w, r, "/hop/"+next, http.StatusFound)
	}))
	c := tbrClient(t, srv.URL, tbrFast("CONNECT_TIMEOUT", "100ms", "TLS_HANDSHAKE_TIMEOUT", "500ms", "READ_TIMEOUT", "600ms",
		"CALL_TIMEOUT", "1700ms", "MAX_REDIRECTS", "5"))
	for _, tc := range []struct {
		name string
		do   func(*http.Request) (*http.Response, error)
	}{{"Do", c.Do}, {"HTTPClient", c.HTTPClient().Do}} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Requests()
			req, _ := http.NewRequestWithContext(tbrCtx(t, 10*time.Second), http.MethodGet, "/hop/4", nil)
			start := time.Now()
			resp, err := tc.do(req)
			took := time.Since(start)
			if err == nil {
				body := tbrRead(t, resp)
				t.Fatalf("got %d %q after %v and %d hops, want a call timeout at 1.7s", resp.StatusCode, body, took, srv.Requests()-before)
			}
			e := tbrError(t, err, observe.OpCallTimeout)
			t.Logf("%v after %d hops: %v", took.Round(time.Millisecond), srv.Requests()-before, e)
			if hops := srv.Requests() - before; hops > 5 {
				t.Errorf("%d hops sent, want at most 5", hops)
			}
		})
	}
}

// Item 8: HTTPClient().Do's errors carry no secret, whether from BASE_URL
// or from a redirect's Location, as Do's do not.
func TestIssue10HTTPClientErrorsRedacted(t *testing.T) {
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/x" {
			http.Redirect(w, r, "/y?signature=SECRET2", http.StatusFound)
			return
		}
		outboundtest.Reset().ServeHTTP(w, r)
	}))
	base := strings.Replace(srv.URL, "http://", "http://alice:pw@", 1) + "/?api_key=SECRET1"
	c := tbrClient(t, base, tbrFast("RETRIES", "0"))
	for _, tc := range []struct {
		name string
		do   func(*http.Request) (*http.Response, error)
	}{{"Do", c.Do}, {"HTTPClient", c.HTTPClient().Do}} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(tbrCtx(t, 10*time.Second), http.MethodGet, "/x", nil)
			resp, err := tc.do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("got a response, want the reset's error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%T %v does not wrap an *Error", err, err)
			}
			msg := err.Error()
			t.Logf("%s", msg)
			for _, secret := range []string{"SECRET1", "SECRET2", "alice", "pw@"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q shows %q", msg, secret)
				}
			}
		})
	}
}

// Item 14: every error reads as one sentence, saying the system, the
// stage and the cause once each, and still matches its sentinel.
func TestIssue10ErrorTextsSayEachThingOnce(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
		is   error
	}{
		{&Error{System: "inv", Op: observe.OpBulkhead, Err: bulkhead.ErrFull}, "outbound inv: bulkhead: full", bulkhead.ErrFull},
		{&Error{System: "inv", Op: observe.OpBreaker, Err: breaker.Open}, "outbound inv: breaker: circuit open", ErrCircuitOpen},
		{&Error{System: "inv", Op: observe.OpBreaker, Err: breaker.ProbesBusy}, "outbound inv: breaker: circuit half-open, every probe taken", gobreaker.ErrTooManyRequests},
		{&Error{System: "inv", Op: observe.OpBudget, Err: capbudget.ErrExhausted}, "outbound inv: time budget exhausted", capbudget.ErrExhausted},
		{&Error{System: "inv", Op: observe.OpClosed, Err: ErrClosed}, "outbound inv: registry closed", ErrClosed},
		{&Error{System: "inv", Op: observe.OpCallTimeout, Method: "GET", URL: "http://h/x", Err: capbudget.ErrCallTimeout},
			`outbound inv: GET "http://h/x": call timeout`, context.DeadlineExceeded},
		{&Error{System: "inv", Op: observe.OpCallTimeout, Method: "GET", URL: "http://h/x", Attempts: 3, StatusCode: 503,
			Err: cause.Join(errors.New("status 503"), capbudget.ErrCallTimeout)},
			`outbound inv: GET "http://h/x": call timeout after 3 attempts (last status 503): status 503; call timeout`, capbudget.ErrCallTimeout},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%v does not match %v", tc.err, tc.is)
		}
	}

	// On real sockets: a full bulkhead, and a transport error through
	// HTTPClient, whose *url.Error names the URL (the *Error does not
	// again).
	gate := outboundtest.NewHang(outboundtest.Reply{Body: "ok"})
	srv := outboundtest.NewUpstream(t, gate)
	c := tbrClient(t, srv.URL, tbrFast("MAX_CONCURRENT", "1", "RETRIES", "0"))
	held := holdPermit(t, c, gate)
	_, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/x")
	if err == nil || err.Error() != "outbound inv: bulkhead: full" || !errors.Is(err, bulkhead.ErrFull) {
		t.Errorf("full bulkhead: got %v, want \"outbound inv: bulkhead: full\" matching bulkhead.ErrFull", err)
	}
	if _, ok := err.(*Error); !ok {
		t.Errorf("Do returned %T, want *Error", err)
	}
	gate.Release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	dead := testutil.RefusedAddr(t)
	c2 := tbrClient(t, "http://"+dead, tbrFast("RETRIES", "0"))
	req, _ := http.NewRequestWithContext(tbrCtx(t, 5*time.Second), http.MethodGet, "/y", nil)
	_, err = c2.HTTPClient().Do(req)
	if err == nil {
		t.Fatal("refused address answered")
	}
	t.Logf("%v", err)
	if n := strings.Count(err.Error(), "/y"); n != 1 {
		t.Errorf("%q names the URL %d times, want once", err, n)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != observe.OpConnect {
		t.Errorf("%v: want an *Error with Op connect inside", err)
	}
}

// Item 5: when waiting for the upstream's Retry-After would pass the
// deadline, the hint travels on the error.
func TestIssue10RetryAfterOnError(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusTooManyRequests, Header: outboundtest.RetryAfterSeconds(1)})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	ctx := tbrCtx(t, 500*time.Millisecond)
	_, took, err := tbrGet(t, ctx, c, "/")
	e := tbrError(t, err, observe.OpStatus)
	t.Logf("%v: %v", took, e)
	if e.StatusCode != http.StatusTooManyRequests || e.RetryAfter != time.Second {
		t.Errorf("StatusCode, RetryAfter = %d, %v; want 429, 1s", e.StatusCode, e.RetryAfter)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v does not match context.DeadlineExceeded", err)
	}
	if !strings.Contains(e.Error(), "retry after 1s") {
		t.Errorf("%q does not say the hint", e)
	}
}

// Item 6: a caller that cancels while waiting for a permit gets its own
// cancellation, not bulkhead.ErrFull, and no rejection is counted.
func TestIssue10CancelWhileWaitingForPermit(t *testing.T) {
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
	if st := c.Status(); st.BulkheadRejected != 0 {
		t.Errorf("BulkheadRejected = %d, want 0", st.BulkheadRejected)
	}
	gate.Release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

// Item 6: a read of a body that another goroutine closed says so, rather
// than blaming the caller's cancellation.
func TestIssue10ReadAfterCloseByAnotherGoroutine(t *testing.T) {
	srv := outboundtest.NewUpstream(t, outboundtest.Trickle(time.Hour))
	c := tbrClient(t, srv.URL, tbrFast())
	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	time.Sleep(50 * time.Millisecond) // the reader is blocked in Read
	_ = resp.Body.Close()
	err = <-read
	e := tbrError(t, err, observe.OpBodyClosed)
	if errors.Is(err, context.Canceled) {
		t.Errorf("%v matches context.Canceled", e)
	}
	t.Log(e)
}

// Item 13: with OMIT_TIME_BUDGET the system never receives X-Time-Budget,
// not even one the caller set, on any attempt of either entry point.
func TestIssue10OmitTimeBudgetStripsCallerHeader(t *testing.T) {
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

// holdPermit starts a call to /held that the gate keeps in flight, so
// that it holds one of c's permits, and returns once the gate has it. The
// channel gives the call's error after the gate opens.
func holdPermit(t *testing.T, c *Client, gate *outboundtest.Hang) <-chan error {
	t.Helper()
	held := make(chan error, 1)
	go func() {
		resp, _, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/held")
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	if err := gate.WaitFor(tbrCtx(t, 5*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	return held
}
