package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// Regression tests for issue 16: outbound behind real SDKs.

// i16Env is a system "pay" at url with quick backoffs.
func i16Env(url string, kv ...string) map[string]string {
	env := map[string]string{
		"OUTBOUND_SYSTEMS": "pay", "PAY_BASE_URL": url,
		"PAY_BACKOFF_BASE": "1ms", "PAY_BACKOFF_MAX": "2ms",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env["PAY_"+kv[i]] = kv[i+1]
	}
	return env
}

func i16Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// i16Send sends method path through send and returns the status (0 on an
// error), the body read and closed, and the error.
func i16Send(ctx context.Context, t *testing.T, send func(*http.Request) (*http.Response, error), method, url string, h http.Header) (int, http.Header, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := send(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp.StatusCode, resp.Header, string(b), nil
}

// outcomes records the outcomes of calls.
type outcomes struct {
	mu  sync.Mutex
	got []observe.Outcome
}

func (o *outcomes) ObserveAttempt(observe.AttemptEvent) {}
func (o *outcomes) ObserveCall(ev observe.CallEvent) {
	o.mu.Lock()
	o.got = append(o.got, ev.Outcome)
	o.mu.Unlock()
}
func (o *outcomes) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}
func (o *outcomes) last() observe.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got[len(o.got)-1]
}

// Row "breaker open through the SDK": through HTTPClient, a refusal by the
// breaker, the bulkhead or the budget is a made-up 503 that SDKs do not
// retry, with no I/O; Do still returns the typed error, and observers see
// the refusal, not a 503. Before the fix HTTPClient returned an error,
// which SDKs retry with their own backoff (1.4 s per call).
func TestIssue16RefusalIsAResponseSDKsDoNotRetry(t *testing.T) {
	t.Parallel()
	hang := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusServiceUnavailable})
	mux := http.NewServeMux()
	mux.Handle("/hang", hang)
	mux.Handle("/", outboundtest.Reply{Status: http.StatusServiceUnavailable})
	up := outboundtest.NewUpstream(t, mux)
	obs := &outcomes{}
	reg := registrytest.New(t, i16Env(up.URL, "RETRIES", "0", "BREAKER_MIN_REQUESTS", "1",
		"BREAKER_OPEN_TIMEOUT", "1h", "MAX_CONCURRENT", "1"), registrytest.With(registry.WithObserver(obs)))
	c, _ := reg.Client("pay")
	hc := c.HTTPClient()
	ctx := i16Ctx(t)

	check := func(name string, status int, h http.Header, body string, err error, reason string, sentinel error, out observe.Outcome) {
		t.Helper()
		if err != nil || status != http.StatusServiceUnavailable {
			t.Fatalf("%s: HTTPClient gave %d, %v; want the refusal 503", name, status, err)
		}
		for k, want := range map[string]string{"X-Should-Retry": "false", "Stripe-Should-Retry": "false",
			registry.RefusedHeader: reason, "X-Outbound-System": "pay"} {
			if got := h.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", name, k, got, want)
			}
		}
		if ct := h.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q, want a problem detail", name, ct)
		}
		var doc struct {
			Type, Detail, System, Reason string
			Status                       int
			Error                        struct{ Type, Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.Type != "urn:outbound:refused:"+reason ||
			doc.Reason != reason || doc.System != "pay" || doc.Status != 503 || !strings.Contains(doc.Detail, "outbound pay") {
			t.Errorf("%s: body %q (%v), want a problem detail naming the reason and the system", name, body, err)
		}
		if doc.Error.Type != "outbound_refused" || doc.Error.Code != reason || doc.Error.Message != doc.Detail {
			t.Errorf("%s: body %q, want the common error envelope that SDKs read", name, body)
		}
		if e := registry.Refusal(h); !errors.Is(e, sentinel) {
			t.Errorf("%s: Refusal(header) = %v, want it to match %v", name, e, sentinel)
		}
		if got := obs.last(); got != out {
			t.Errorf("%s: observers saw %v, want %v", name, got, out)
		}
	}

	// Bulkhead full: one call hangs with the only permit.
	held := make(chan error, 1)
	go func() {
		_, _, _, err := i16Send(ctx, t, hc.Do, http.MethodGet, "/hang", nil)
		held <- err
	}()
	if err := hang.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	status, h, body, err := i16Send(ctx, t, hc.Do, http.MethodGet, "/x", nil)
	check("bulkhead full", status, h, body, err, "bulkhead-full", bulkhead.ErrFull, observe.OutcomeBulkheadFull)
	if h.Get("Retry-After") != "1" {
		t.Errorf("bulkhead full: Retry-After %q, want 1", h.Get("Retry-After"))
	}
	hang.Release()
	if err := <-held; err != nil {
		t.Fatalf("the held call: %v", err)
	}
	// That 503 opened the breaker (BREAKER_MIN_REQUESTS 1).
	hits := up.Requests()
	status, h, body, err = i16Send(ctx, t, hc.Do, http.MethodGet, "/x", nil)
	check("breaker open", status, h, body, err, "breaker-open", registry.ErrCircuitOpen, observe.OutcomeBreakerOpen)
	if h.Get("Retry-After") != "3600" {
		t.Errorf("breaker open: Retry-After %q, want 3600 (BREAKER_OPEN_TIMEOUT)", h.Get("Retry-After"))
	}
	// Budget spent: 50ms left is less than the 100ms reserve.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	status, h, body, err = i16Send(short, t, hc.Do, http.MethodGet, "/x", nil)
	check("budget spent", status, h, body, err, "budget-spent", capbudget.ErrExhausted, observe.OutcomeBudgetSpent)
	if got := up.Requests(); got != hits {
		t.Errorf("the refusals reached the upstream: %d requests, want %d", got, hits)
	}

	// Do keeps its typed error.
	if _, _, _, err := i16Send(ctx, t, c.Do, http.MethodGet, "/x", nil); !errors.Is(err, registry.ErrCircuitOpen) {
		t.Errorf("Do with the breaker open: %v, want ErrCircuitOpen", err)
	}
}

// An upstream cannot forge a refusal: HTTPClient removes the marker from
// its responses.
func TestIssue16RefusedHeaderNotForgeable(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: 503,
		Header: http.Header{registry.RefusedHeader: {"breaker-open"}}})
	reg := registrytest.New(t, i16Env(up.URL, "RETRIES", "0"))
	c, _ := reg.Client("pay")
	_, h, _, err := i16Send(i16Ctx(t), t, c.HTTPClient().Do, http.MethodGet, "/", nil)
	if err != nil || h.Get(registry.RefusedHeader) != "" || registry.Refusal(h) != nil {
		t.Errorf("upstream's marker came through: %v, %v", h, err)
	}
}

// Row "outbound overrides do not retry": X-Should-Retry and
// Stripe-Should-Retry "false" stop outbound's retries; "true" allows a
// retry of a non-temporary status, for a replayable request only. Before
// the fix a 503 with "false" took 1 + RETRIES hits, and a 409 with "true"
// was never retried.
func TestIssue16ServerSaysDoNotRetry(t *testing.T) {
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
			reg := registrytest.New(t, i16Env(up.URL, "RETRIES", "2"))
			c, _ := reg.Client("pay")
			status, _, _, err := i16Send(i16Ctx(t), t, c.Do, tc.method, "/v1/charges", tc.req)
			if err != nil || status != tc.reply.Status {
				t.Fatalf("got %d, %v; want the %d response", status, err, tc.reply.Status)
			}
			if got := up.Requests(); got != tc.wantHits {
				t.Errorf("upstream hits = %d, want %d", got, tc.wantHits)
			}
		})
	}
}

// Row "BASE_URL is not enforced": an absolute URL of another origin is
// refused before any I/O, on Do and HTTPClient, with an error naming both
// origins; a relative URL and BASE_URL's own origin pass, and redirects
// keep FOLLOW_REDIRECTS. Before the fix the request went to the other
// host with the system's Authorization and X-Time-Budget.
func TestIssue16OtherOriginRefused(t *testing.T) {
	t.Parallel()
	other := outboundtest.NewUpstream(t, outboundtest.Healthy())
	mux := http.NewServeMux()
	mux.Handle("/v1/moved", http.RedirectHandler(other.URL+"/there", http.StatusFound))
	mux.Handle("/", outboundtest.Healthy())
	up := outboundtest.NewUpstream(t, mux)
	reg := registrytest.New(t, i16Env("http://user:s3cret@"+up.Addr()+"/v1", "FOLLOW_REDIRECTS", "any"))
	c, _ := reg.Client("pay")
	ctx := i16Ctx(t)

	for name, send := range map[string]func(*http.Request) (*http.Response, error){"Do": c.Do, "HTTPClient": c.HTTPClient().Do} {
		_, _, _, err := i16Send(ctx, t, send, http.MethodGet, other.URL+"/steal?token=abc", nil)
		if !errors.Is(err, registry.ErrOtherOrigin) {
			t.Fatalf("%s to another origin: %v, want ErrOtherOrigin", name, err)
		}
		if want := "origin " + other.URL + " is not BASE_URL's http://" + up.Addr(); !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", name, err, want)
		}
		// net/http's *url.Error around HTTPClient's shows the URL as the
		// caller wrote it; outbound's own error shows only origins.
		var e *registry.Error
		if errors.As(err, &e); e == nil || strings.Contains(e.Error(), "s3cret") || strings.Contains(e.Error(), "abc") {
			t.Errorf("%s: the error shows a secret: %v", name, e)
		}
		t.Logf("%s: %v", name, err)
	}
	if other.Requests() != 0 {
		t.Fatalf("the other origin got %d requests, want 0", other.Requests())
	}
	// BASE_URL's origin, absolute (default port spelled or not), and a
	// redirect to the other origin under FOLLOW_REDIRECTS=any pass.
	for _, u := range []string{"http://" + up.Addr() + "/v1/x", "/x", "/moved"} {
		if status, _, _, err := i16Send(ctx, t, c.Do, http.MethodGet, u, nil); err != nil || status != 200 {
			t.Errorf("GET %s: %d, %v; want 200", u, status, err)
		}
	}
	if other.Requests() != 1 {
		t.Errorf("the redirect reached the other origin %d times, want 1", other.Requests())
	}
}

// sse answers a text/event-stream of n events, one every interval, each
// flushed; after stallAfter events (0: never) it stalls until the client
// goes away or the upstream stops.
func sse(n int, every time.Duration, stallAfter int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for i := 1; i <= n; i++ {
			if i > 1 && !outboundtest.Wait(r, every) {
				return
			}
			_, _ = io.WriteString(w, "data: "+strconv.Itoa(i)+"\n\n")
			_ = rc.Flush()
			if i == stallAfter {
				select { // until the client goes away or the upstream stops
				case <-r.Context().Done():
				case <-outboundtest.Stopped(r):
				}
				return
			}
		}
	})
}

// sseEnv is a system whose CALL_TIMEOUT (1.3s) is shorter than the
// stream sse(40, 50ms, 0) (about 2s).
func sseEnv(url string) map[string]string {
	return i16Env(url, "CONNECT_TIMEOUT", "100ms", "TLS_HANDSHAKE_TIMEOUT", "100ms", "READ_TIMEOUT", "200ms", "CALL_TIMEOUT", "1300ms",
		"RETRIES", "0", "MAX_CONCURRENT", "2")
}

// Row "streams": a stream (WithStream) outlives CALL_TIMEOUT, holding its
// permit until the body is closed; before, a 3 s SSE stream was cut at
// CALL_TIMEOUT. Without WithStream the same stream is still cut.
func TestIssue16StreamOutlivesCallTimeout(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, sse(40, 50*time.Millisecond, 0))
	reg := registrytest.New(t, sseEnv(up.URL))
	c, _ := reg.Client("pay")
	for name, send := range map[string]func(*http.Request) (*http.Response, error){"Do": c.Do, "HTTPClient": c.HTTPClient().Do} {
		req, _ := http.NewRequestWithContext(registry.WithStream(i16Ctx(t), time.Second), http.MethodGet, up.URL+"/events", nil)
		resp, err := send(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st := c.Status(); st.InFlight != 1 {
			t.Errorf("%s: in flight with the stream open = %d, want 1 (its permit)", name, st.InFlight)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: reading the stream: %v after %d events", name, err, strings.Count(string(b), "data:"))
		}
		if got := strings.Count(string(b), "data:"); got != 40 {
			t.Errorf("%s: %d events, want 40", name, got)
		}
		_ = resp.Body.Close()
	}
	// Without WithStream, CALL_TIMEOUT cuts the same stream.
	req, _ := http.NewRequestWithContext(i16Ctx(t), http.MethodGet, up.URL+"/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	var e *registry.Error
	if !errors.As(err, &e) || e.Op != observe.OpCallTimeout {
		t.Errorf("without WithStream: %v after %d events, want a call timeout", err, strings.Count(string(b), "data:"))
	}
}

// A stream that stalls is cut by its idle bound, with observe.OpIdleTimeout, and
// its permit goes back; the headers still obey READ_TIMEOUT.
func TestIssue16StreamIdleBound(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/stall", sse(40, 10*time.Millisecond, 3))
	mux.Handle("/slow", outboundtest.SlowHeaders(time.Minute))
	up := outboundtest.NewUpstream(t, mux)
	reg := registrytest.New(t, sseEnv(up.URL))
	c, _ := reg.Client("pay")
	ctx := registry.WithStream(i16Ctx(t), 150*time.Millisecond)

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/stall", nil)
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	var e *registry.Error
	if !errors.As(err, &e) || e.Op != observe.OpIdleTimeout || !e.Timeout() || errors.Is(err, context.Canceled) {
		t.Fatalf("stalled stream: %v (%#v), want an idle timeout, not a cancellation", err, e)
	}
	if got := strings.Count(string(b), "data:"); got != 3 {
		t.Errorf("%d events before the stall, want 3", got)
	}
	t.Logf("stalled stream: %v", err)
	_ = resp.Body.Close()
	if st := c.Status(); st.InFlight != 0 {
		t.Errorf("in flight after the stream's end = %d, want 0 (the permit given back)", st.InFlight)
	}

	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "/slow", nil)
	if _, err := c.Do(req); !errors.As(err, &e) || e.Op != observe.OpReadTimeout {
		t.Errorf("slow headers on a stream: %v, want a read timeout", err)
	}
}

// Row "deadline overrun": a call cut by the caller's budget is answered,
// through HTTPClient, like a budget refused up front, so that no SDK
// retries past the caller's deadline.
func TestIssue16BudgetTimeoutIsARefusal(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
	reg := registrytest.New(t, i16Env(up.URL, "RETRIES", "0"))
	c, _ := reg.Client("pay")
	ctx, cancel := context.WithTimeout(i16Ctx(t), 300*time.Millisecond)
	defer cancel()
	status, h, _, err := i16Send(ctx, t, c.HTTPClient().Do, http.MethodGet, "/", nil)
	if err != nil || status != 503 || h.Get(registry.RefusedHeader) != "budget-spent" {
		t.Fatalf("budget cut through HTTPClient: %d %v %v, want the budget-spent refusal", status, h, err)
	}
	if e := registry.Refusal(h); !errors.Is(e, context.DeadlineExceeded) || !errors.Is(e, capbudget.ErrExhausted) {
		t.Errorf("Refusal = %v, want a spent budget", e)
	}
}

// Before its headers a stream is an ordinary call: CALL_TIMEOUT still
// bounds its attempts and retries together, with the same error.
func TestIssue16StreamCallTimeoutBeforeHeaders(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
	env := sseEnv(up.URL)
	env["PAY_RETRIES"], env["PAY_BACKOFF_BASE"], env["PAY_BACKOFF_MAX"] = "10", "100ms", "100ms"
	reg := registrytest.New(t, env)
	c, _ := reg.Client("pay")
	req, _ := http.NewRequestWithContext(registry.WithStream(i16Ctx(t), time.Minute), http.MethodGet, "/", nil)
	_, err := c.Do(req)
	var e *registry.Error
	if !errors.As(err, &e) || e.Op != observe.OpCallTimeout || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("stream whose headers never come: %v, want a call timeout", err)
	}
	if n := up.Requests(); n >= 11 {
		t.Errorf("%d attempts: CALL_TIMEOUT did not cut the retries", n)
	}
	t.Logf("%v (%d requests)", err, up.Requests())
}
