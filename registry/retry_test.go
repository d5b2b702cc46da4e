package registry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

func TestRetryTemporaryStatusThenSuccess(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, testutil.FailN(2, http.StatusServiceUnavailable)...)
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	resp, elapsed, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if resp.StatusCode != http.StatusOK || tbrRead(t, resp) != "ok" {
		t.Fatalf("got %d, want 200 ok", resp.StatusCode)
	}
	t.Logf("503, 503, 200 in %v", elapsed)
	if n := srv.Hits(); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
	if st := c.Status(); st.Retries != 2 || st.OK != 1 {
		t.Errorf("Status(): Retries = %d, OK = %d; want 2, 1", st.Retries, st.OK)
	}
}

func TestRetryNotOnClientErrors(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusBadRequest, http.StatusNotFound} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			srv := testutil.Script(t, outboundtest.Reply{Status: code, Body: "no"}, outboundtest.Reply{Body: "ok"})
			c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
			resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if resp.StatusCode != code || tbrRead(t, resp) != "no" {
				t.Errorf("got %d, want %d \"no\"", resp.StatusCode, code)
			}
			if n := srv.Hits(); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

// When retries run out on a temporary status, the caller gets the last
// response, body intact, as http.Client would.
func TestRetryExhaustedReturnsLastResponse(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "try later"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	if body := tbrRead(t, resp); body != "try later" {
		t.Errorf("body %q, want \"try later\"", body)
	}
	if n := srv.Hits(); n != 3 {
		t.Errorf("server saw %d requests, want 3 (1 + RETRIES)", n)
	}
}

// A Retry-After longer than the caller has left ends the call at once with
// the status and the deadline both visible.
func TestRetryAfterPastDeadline(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusTooManyRequests, Header: outboundtest.RetryAfterSeconds(5)},
		outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	// The call's deadline is 1.9s away (2s less the reserve): far beyond
	// what one 429 takes even on a loaded machine, far short of the 5s
	// asked (within RETRY_AFTER_MAX).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, elapsed, err := tbrGet(t, ctx, c, "/")
	t.Logf("gave up after %v: %v", elapsed, err)
	e := tbrError(t, err, observe.OpStatus)
	if e.StatusCode != http.StatusTooManyRequests {
		t.Errorf("Error.StatusCode = %d, want 429", e.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error does not match context.DeadlineExceeded: %v", err)
	}
	// The call's deadline was not waited for: had it fired, the cause
	// would be capbudget.ErrExhausted.
	if errors.Is(err, capbudget.ErrExhausted) {
		t.Errorf("the call waited for its deadline: %v", err)
	}
	if elapsed >= 1900*time.Millisecond {
		t.Errorf("returned after %v, want at once (before the call's deadline, 1.9s)", elapsed)
	}
	if n := srv.Hits(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

// A Retry-After HTTP-date in the future is waited for, then the retry
// succeeds.
func TestRetryAfterDateHonoured(t *testing.T) {
	t.Parallel()
	// The date has whole seconds: the wait is between 1s and 2s.
	srv := testutil.Script(t,
		outboundtest.Reply{Status: http.StatusTooManyRequests, Header: outboundtest.RetryAfterDate(time.Now().Add(2 * time.Second))},
		outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	resp, elapsed, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if resp.StatusCode != http.StatusOK || tbrRead(t, resp) != "ok" {
		t.Fatalf("got %d, want 200 ok", resp.StatusCode)
	}
	t.Logf("429 (Retry-After: date), 200 in %v", elapsed)
	if elapsed < 800*time.Millisecond || elapsed > 3*time.Second {
		t.Errorf("took %v, want the Retry-After wait of 1-2s", elapsed)
	}
	if n := srv.Hits(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

// A Retry-After above RETRY_AFTER_MAX is not waited for: the caller gets
// the 429 at once.
func TestRetryAfterAboveMax(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusTooManyRequests, Header: outboundtest.RetryAfterSeconds(5), Body: "slow down"},
		outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2", "RETRY_AFTER_MAX", "1s"))
	resp, elapsed, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || tbrRead(t, resp) != "slow down" {
		t.Errorf("got %d, want 429 \"slow down\"", resp.StatusCode)
	}
	// Waiting 5s would have led to a second request and its 200.
	if elapsed > 2*time.Second {
		t.Errorf("took %v, want at once (the hint was 5s)", elapsed)
	}
	if n := srv.Hits(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestRetryPOST(t *testing.T) {
	t.Parallel()
	post := func(t *testing.T, c *Client, body io.Reader, key string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(tbrCtx(t, 5*time.Second), http.MethodPost, "/orders", body)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		return resp
	}

	t.Run("without Idempotency-Key sent once", func(t *testing.T) {
		srv := testutil.Script(t, testutil.FailN(2, http.StatusServiceUnavailable)...)
		c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
		resp := post(t, c, bytes.NewReader([]byte(`{"qty":1}`)), "")
		tbrRead(t, resp)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("status %d, want the 503", resp.StatusCode)
		}
		if n := srv.Hits(); n != 1 {
			t.Errorf("server saw %d requests, want 1", n)
		}
	})

	t.Run("with Idempotency-Key and a replayable body retried", func(t *testing.T) {
		srv := testutil.Script(t, testutil.FailN(2, http.StatusServiceUnavailable)...)
		c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
		const payload = `{"sku":"42","qty":3}`
		resp := post(t, c, bytes.NewReader([]byte(payload)), "order-7")
		if resp.StatusCode != http.StatusOK || tbrRead(t, resp) != "ok" {
			t.Fatalf("got %d, want 200 ok", resp.StatusCode)
		}
		got := srv.Received()
		if len(got) != 3 {
			t.Fatalf("server saw %d requests, want 3", len(got))
		}
		for i, r := range got {
			if r.Method != http.MethodPost || string(r.Body) != payload || r.Header.Get("Idempotency-Key") != "order-7" {
				t.Errorf("attempt %d: %s body %q key %q, want POST %q key order-7",
					i+1, r.Method, r.Body, r.Header.Get("Idempotency-Key"), payload)
			}
		}
	})

	t.Run("with Idempotency-Key but a one-shot body sent once", func(t *testing.T) {
		srv := testutil.Script(t, testutil.FailN(2, http.StatusServiceUnavailable)...)
		c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
		resp := post(t, c, io.NopCloser(strings.NewReader(`{"qty":1}`)), "order-8")
		tbrRead(t, resp)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("status %d, want the 503", resp.StatusCode)
		}
		if n := srv.Hits(); n != 1 {
			t.Errorf("server saw %d requests, want 1", n)
		}
		if got := srv.Received(); len(got) == 1 && string(got[0].Body) != `{"qty":1}` {
			t.Errorf("body %q, want the payload", got[0].Body)
		}
	})
}

// Transport errors (a connection reset before any response) are retried
// for GET, each on a new connection.
func TestRetryTransportErrors(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t,
		outboundtest.Reply{Handler: outboundtest.Reset()},
		outboundtest.Reply{Handler: outboundtest.Reset()},
		outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if resp.StatusCode != http.StatusOK || tbrRead(t, resp) != "ok" {
		t.Fatalf("got %d, want 200 ok", resp.StatusCode)
	}
	if n := srv.Hits(); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
	if n := srv.Conns(); n != 3 {
		t.Errorf("server saw %d connections, want 3 (a reset connection is not reused)", n)
	}
}

// tbrObserver calls onAttempt for every attempt.
type tbrObserver struct {
	onAttempt func(observe.AttemptEvent)
	mu        sync.Mutex
	calls     []observe.CallEvent
}

func (o *tbrObserver) ObserveAttempt(e observe.AttemptEvent) {
	if o.onAttempt != nil {
		o.onAttempt(e)
	}
}

func (o *tbrObserver) ObserveCall(e observe.CallEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, e)
}

func (o *tbrObserver) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}

// A caller that cancels while the call waits to retry gets its
// cancellation back at once; no further attempt is sent.
func TestRetryCanceledDuringWait(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Header: outboundtest.RetryAfterSeconds(3)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stop func() bool
	obs := &tbrObserver{onAttempt: func(e observe.AttemptEvent) {
		// The first attempt got its 503; the call is about to wait 3s.
		if e.Attempt == 1 {
			stop = time.AfterFunc(100*time.Millisecond, cancel).Stop
		}
	}}
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"), WithObserver(obs))
	_, elapsed, err := tbrGet(t, ctx, c, "/")
	if stop != nil {
		stop()
	}
	t.Logf("canceled after %v: %v", elapsed, err)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error does not match context.Canceled: %v", err)
	}
	e := tbrError(t, err, observe.OpCanceled)
	if e.StatusCode != http.StatusServiceUnavailable || e.Attempts != 1 {
		t.Errorf("Error.StatusCode = %d, Attempts = %d; want 503, 1", e.StatusCode, e.Attempts)
	}
	if elapsed > time.Second {
		t.Errorf("returned after %v, want promptly after the cancel at 100ms (the wait was 3s)", elapsed)
	}
	if n := srv.Hits(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.calls) != 1 || obs.calls[0].Outcome != observe.OutcomeCanceled {
		t.Errorf("observed calls %+v, want one with outcome %v", obs.calls, observe.OutcomeCanceled)
	}
}

// A 503 with a 64 KiB body is drained before the retry, so the retry
// reuses the connection.
func TestRetryReusesConnection(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, testutil.LargeBody(http.StatusServiceUnavailable, testutil.LargeBodySize), outboundtest.Reply{Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if resp.StatusCode != http.StatusOK || tbrRead(t, resp) != "ok" {
		t.Fatalf("got %d, want 200 ok", resp.StatusCode)
	}
	if n := srv.Hits(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
	if n := srv.Conns(); n != 1 {
		t.Errorf("server saw %d connections, want 1 (the 503's body drained, connection reused)", n)
	}
}

// A Retry-After of 2^32 seconds or more is a valid (huge) delay, longer
// than RETRY_AFTER_MAX: the call ends with the response.
func TestRetryAfterTooLargeFor32BitsEndsTheCall(t *testing.T) {
	t.Parallel()
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

// When waiting for the upstream's Retry-After would pass the deadline,
// the hint travels on the error.
func TestRetryAfterHintTravelsOnTheError(t *testing.T) {
	t.Parallel()
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

// The server's word wins over the status: X-Should-Retry or
// Stripe-Should-Retry "false" stops outbound's retries (a 503 with it
// takes one hit, not 1 + RETRIES); "true" allows a retry of a
// non-temporary status such as 409, for a replayable request only.
func TestRetryFollowsTheServersShouldRetryHeader(t *testing.T) {
	t.Parallel()
	idem := http.Header{"Idempotency-Key": {"k1"}}
	for _, tc := range []struct {
		name     string
		method   string
		req      http.Header
		reply    outboundtest.Reply
		wantHits int64
	}{
		{"503 x-should-retry false", "GET", nil, outboundtest.Reply{Status: 503, Header: http.Header{"X-Should-Retry": {"false"}}}, 1},
		{"429 Stripe-Should-Retry false", "POST", idem, outboundtest.Reply{Status: 429, Header: http.Header{"Stripe-Should-Retry": {"false"}}}, 1},
		{"503 without a word", "GET", nil, outboundtest.Reply{Status: 503}, 3},
		{"409 Stripe-Should-Retry true, GET", "GET", nil, outboundtest.Reply{Status: 409, Header: http.Header{"Stripe-Should-Retry": {"true"}}}, 3},
		{"409 x-should-retry true, POST with Idempotency-Key", "POST", idem, outboundtest.Reply{Status: 409, Header: http.Header{"X-Should-Retry": {"true"}}}, 3},
		{"409 x-should-retry true, bare POST", "POST", nil, outboundtest.Reply{Status: 409, Header: http.Header{"X-Should-Retry": {"true"}}}, 1},
		{"409 without a word", "GET", nil, outboundtest.Reply{Status: 409}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := outboundtest.NewUpstream(t, tc.reply)
			reg := loadRegistry(t, payEnv(up.URL, "RETRIES", "2"))
			c := reg.MustClient("pay")
			status, _, _, err := sendRead(tbrCtx(t, 10*time.Second), t, c.Do, tc.method, "/v1/charges", tc.req)
			if err != nil || status != tc.reply.Status {
				t.Fatalf("got %d, %v; want the %d response", status, err, tc.reply.Status)
			}
			if got := up.Requests(); got != tc.wantHits {
				t.Errorf("upstream hits = %d, want %d", got, tc.wantHits)
			}
		})
	}
}
