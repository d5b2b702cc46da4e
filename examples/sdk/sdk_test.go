package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stripe/stripe-go/v82"
	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/examples/sdk"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The keys the SDKs send; no error or log record may show them.
const (
	stripeKey = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
	openaiKey = "sk-proj-Zq81bXc0fake0key0for0tests"
)

// Fake upstreams: what each API answers when it is healthy.
var (
	balanceOK = outboundtest.Reply{Header: http.Header{"Content-Type": {"application/json"}},
		Body: `{"object":"balance","livemode":false,"available":[],"pending":[]}`}
	modelOK = outboundtest.Reply{Header: http.Header{"Content-Type": {"application/json"}},
		Body: `{"id":"gpt-x","object":"model","created":1,"owned_by":"tests"}`}
	// An outage as a load balancer answers it: not the API's JSON
	// (stripe-go never retries an error the API itself wrote).
	outage = outboundtest.Reply{Status: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"text/html"}},
		Body: "<html><body>503 Service Unavailable</body></html>"}
)

// env declares both systems at url with the given settings (KEY, value,
// ...), applied to both, and quick backoffs.
func env(url string, kv ...string) map[string]string {
	e := map[string]string{}
	for _, p := range []string{"STRIPE_", "OPENAI_"} {
		e[p+"BASE_URL"] = url
		e[p+"BACKOFF_BASE"] = "5ms"
		e[p+"BACKOFF_MAX"] = "10ms"
		for i := 0; i+1 < len(kv); i += 2 {
			e[p+kv[i]] = kv[i+1]
		}
	}
	// The SDKs' own variables under the same prefixes are not outbound's.
	e["STRIPE_SECRET_KEY"] = stripeKey
	e["OPENAI_API_KEY"] = openaiKey
	return e
}

// sdks builds both SDKs on a registry over up; sdkRetries < 0 leaves the
// SDKs' own retries at their defaults (2 each), as a user who forgot would.
type sdks struct {
	reg           *registry.Registry
	stripeC, oaiC *registry.Client
	stripe        *stripe.Client
	openai        openai.Client
	logs, sdkLogs *syncBuffer
}

func newSDKs(t *testing.T, up *outboundtest.Upstream, defaultSDKRetries bool, kv ...string) *sdks {
	t.Helper()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := registrytest.New(t, env(up.URL+"/v1", kv...), registrytest.Systems(sdk.Stripe, sdk.OpenAI),
		registrytest.With(registry.WithLogger(logger)), registrytest.Watch(up))
	s := &sdks{reg: reg, stripeC: reg.MustClient("stripe"), oaiC: reg.MustClient("openai"), logs: logs, sdkLogs: &syncBuffer{}}
	stripeLog := bufLogger{s.sdkLogs}
	if defaultSDKRetries {
		// What a user who wires only the HTTP client gets: the SDKs'
		// own retries at their defaults, on top of outbound's.
		s.stripe = stripe.NewClient(stripeKey, stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
			HTTPClient: s.stripeC.HTTPClient(), URL: stripe.String(s.stripeC.BaseURL().String()), LeveledLogger: stripeLog})))
		s.openai = openai.NewClient(option.WithAPIKey(openaiKey), option.WithBaseURL(s.oaiC.BaseURL().String()),
			option.WithHTTPClient(s.oaiC.HTTPClient()))
	} else {
		s.stripe = sdk.NewStripe(s.stripeC, stripeKey, stripeLog)
		s.openai = sdk.NewOpenAI(s.oaiC, openaiKey)
	}
	return s
}

// call makes one SDK call: stripe's GET /v1/balance or openai's GET
// /v1/models/gpt-x.
func (s *sdks) call(ctx context.Context, which string) error {
	if which == "stripe" {
		_, err := s.stripe.V1Balance.Retrieve(ctx, nil)
		return err
	}
	_, err := s.openai.Models.Get(ctx, "gpt-x")
	return err
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Happy path through both SDKs: the SDK's base URL is BASE_URL, so the
// one-origin rule lets it through, and the third party gets no
// X-Time-Budget.
func TestSDKsHappyPath(t *testing.T) {
	t.Parallel()
	script := outboundtest.NewScript(balanceOK, modelOK)
	up := outboundtest.NewUpstream(t, script)
	s := newSDKs(t, up, false)
	for _, which := range []string{"stripe", "openai"} {
		if err := s.call(bounded(t), which); err != nil {
			t.Fatalf("%s: %v", which, err)
		}
	}
	for _, r := range script.Received() {
		if r.Header.Get("X-Time-Budget") != "" {
			t.Errorf("%s %s carried X-Time-Budget to a third party", r.Method, r.Path)
		}
	}
}

// TestOneRetryLayerInAnOutage checks that in an outage (a plain-text
// 503, an upstream that answers after READ_TIMEOUT, a reset connection)
// an SDK call costs 1 + RETRIES upstream requests, with the SDK's own
// retries off and with them at their defaults: once outbound has retried
// and given up, its answer tells the SDK not to retry (X-Should-Retry,
// Stripe-Should-Retry, and a body stripe-go reads as its own error), and
// for an error that answer is a response, whose cause sdk.GaveUp reads.
// Both layers at their defaults used to send 9.
func TestOneRetryLayerInAnOutage(t *testing.T) {
	t.Parallel()
	for _, o := range []struct {
		name string
		h    http.Handler
		op   string // the op sdk.GaveUp names; "" for a status
	}{
		{"503", outage, ""},
		{"read timeout", hang, "read timeout"},
		{"reset", outboundtest.Reset(), "transport"},
	} {
		for _, which := range []string{"stripe", "openai"} {
			for _, both := range []bool{false, true} {
				name := o.name + "/" + which + "/SDK retries off"
				if both {
					name = o.name + "/" + which + "/SDK retries at their defaults"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					up := outboundtest.NewUpstream(t, o.h)
					s := newSDKs(t, up, both, "RETRIES", "2", "CONNECT_TIMEOUT", "100ms", "TLS_HANDSHAKE_TIMEOUT", "100ms",
						"READ_TIMEOUT", "200ms", "CALL_TIMEOUT", "5s")
					start := time.Now()
					err := s.call(bounded(t), which)
					took := time.Since(start)
					if err == nil {
						t.Fatal("an outage gave no error")
					}
					hits := up.Requests()
					t.Logf("%d upstream requests in %v: %v", hits, took.Round(time.Millisecond), err)
					if hits != 3 {
						t.Errorf("%d upstream requests, want 1 + RETRIES = 3", hits)
					}
					var e *registry.Error
					if gu := sdk.GaveUp(err); o.op != "" && (!errors.As(gu, &e) || e.Op.String() != o.op || e.System != which) {
						t.Errorf("sdk.GaveUp(%v) = %v, want outbound's giving up on %s of %s", err, gu, o.op, which)
					}
				})
			}
		}
	}
}

// hang answers after the client has gone: a read timeout.
var hang = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })

// Row "breaker open through the SDK": with the breaker open, an SDK call
// ends at once even with the SDK's retries at their defaults: one breaker
// refusal per SDK call (the SDK did not retry it), no upstream request,
// and the SDK's error carries the refusal, which registry.Refusal reads
// back. Before the fix each call took 1.4-1.5 s and counted 3 refusals.
func TestBreakerOpenFailsFastThroughSDK(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outage)
	s := newSDKs(t, up, true, "RETRIES", "0", "BREAKER_MIN_REQUESTS", "1", "BREAKER_OPEN_TIMEOUT", "1h")
	for _, which := range []string{"stripe", "openai"} {
		c := s.stripeC
		if which == "openai" {
			c = s.oaiC
		}
		// Open the breaker with one outage answer, through Do.
		req, _ := http.NewRequestWithContext(bounded(t), http.MethodGet, "/balance", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if c.Status().Breaker != observe.BreakerOpen {
			t.Fatalf("%s: breaker %v, want open", which, c.Status().Breaker)
		}
		hits, refused := up.Requests(), c.Status().BreakerRefused
		const calls = 20
		start := time.Now()
		for i := 0; i < calls; i++ {
			err := s.call(bounded(t), which)
			if !errors.Is(sdk.Refusal(err), registry.ErrCircuitOpen) {
				t.Fatalf("%s call %d: %v, want the SDK's 503 carrying the breaker's refusal", which, i, err)
			}
		}
		per := time.Since(start) / calls
		t.Logf("%s: %v per SDK call with the breaker open (SDK retries at default)", which, per)
		if got := c.Status().BreakerRefused - refused; got != calls {
			t.Errorf("%s: %d breaker refusals for %d SDK calls, want one each (the SDK retried)", which, got, calls)
		}
		if up.Requests() != hits {
			t.Errorf("%s: %d upstream requests with the breaker open, want 0", which, up.Requests()-hits)
		}
	}
}

// Row "deadline overrun": a call whose budget runs out ends within it,
// even with the SDK's retries at their defaults (stripe-go slept 500 ms
// past a 300 ms budget), and the SDK's error carries the spent budget.
func TestBudgetEndsTheSDKCall(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
	s := newSDKs(t, up, true, "RETRIES", "0")
	for _, which := range []string{"stripe", "openai"} {
		c := s.stripeC
		if which == "openai" {
			c = s.oaiC
		}
		ctx, cancel := context.WithTimeout(bounded(t), 300*time.Millisecond)
		start := time.Now()
		err := s.call(ctx, which)
		took := time.Since(start)
		cancel()
		t.Logf("%s: %v for a 300ms budget: %v", which, took.Round(time.Millisecond), err)
		if !errors.Is(sdk.Refusal(err), context.DeadlineExceeded) {
			t.Errorf("%s: %v, want the SDK's error carrying the spent budget", which, err)
		}
		// The SDK did not come back for a second attempt, which the
		// spent budget would have refused (stripe-go did, after 500 ms).
		if st := c.Status(); st.Calls != 1 || st.BudgetRefused != 0 {
			t.Errorf("%s: %d calls admitted, %d refused for the budget; want 1 and 0", which, st.Calls, st.BudgetRefused)
		}
	}
}

// No key in any error or log record, outbound's or the SDK's, across the
// failures a call can meet: an outage, a read timeout, an open breaker.
func TestNoKeyInErrorsOrLogs(t *testing.T) {
	t.Parallel()
	slow := outboundtest.SlowHeaders(time.Minute)
	mux := http.NewServeMux()
	mux.Handle("/v1/balance", outboundtest.NewScript(outage, outage, outage, slow))
	mux.Handle("/v1/models/gpt-x", outboundtest.NewScript(outage, outage, outage, slow))
	up := outboundtest.NewUpstream(t, mux)
	s := newSDKs(t, up, false, "RETRIES", "2", "CONNECT_TIMEOUT", "200ms", "TLS_HANDSHAKE_TIMEOUT", "200ms", "READ_TIMEOUT", "300ms", "BREAKER_MIN_REQUESTS", "4", "BREAKER_OPEN_TIMEOUT", "1h")
	var errs []string
	for _, which := range []string{"stripe", "openai"} {
		for i := 0; i < 3; i++ { // outage, read timeout, breaker open
			err := s.call(bounded(t), which)
			if err == nil {
				t.Fatalf("%s call %d: no error", which, i)
			}
			errs = append(errs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}
	if !strings.Contains(s.logs.String(), "breaker") {
		t.Errorf("outbound's debug log has no record of the breaker: %s", s.logs.String())
	}
	for _, key := range []string{stripeKey, openaiKey, stripeKey[8:], openaiKey[8:]} {
		for _, e := range errs {
			if strings.Contains(e, key) {
				t.Errorf("an error shows a key: %s", e)
			}
		}
		if strings.Contains(s.logs.String(), key) || strings.Contains(s.sdkLogs.String(), key) {
			t.Errorf("a log record shows a key")
		}
	}
	t.Logf("%d error renderings, %d log bytes (outbound), %d (stripe-go): no key", len(errs), s.logs.Len(), s.sdkLogs.Len())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// bufLogger is stripe-go's logger, every level, into a buffer.
type bufLogger struct{ w io.Writer }

func (l bufLogger) Debugf(f string, v ...any) { fmt.Fprintf(l.w, "[DEBUG] "+f+"\n", v...) }
func (l bufLogger) Infof(f string, v ...any)  { fmt.Fprintf(l.w, "[INFO] "+f+"\n", v...) }
func (l bufLogger) Warnf(f string, v ...any)  { fmt.Fprintf(l.w, "[WARN] "+f+"\n", v...) }
func (l bufLogger) Errorf(f string, v ...any) { fmt.Fprintf(l.w, "[ERROR] "+f+"\n", v...) }

// chunks answers a chat completion stream of n chunks, one every
// interval; after stallAfter chunks (0: never) it stalls until the client
// goes away or the upstream stops.
func chunks(n int, every time.Duration, stallAfter int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for i := 1; i <= n; i++ {
			if i > 1 && !outboundtest.Wait(r, every) {
				return
			}
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\","+
				"\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"},\"finish_reason\":null}]}\n\n", i)
			_ = rc.Flush()
			if i == stallAfter {
				select { // until the client goes away or the upstream stops
				case <-r.Context().Done():
				case <-outboundtest.Stopped(r):
				}
				return
			}
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
}

// Row "streams": through openai-go, a chat completion streamed longer
// than CALL_TIMEOUT (40 chunks at 50ms, CALL_TIMEOUT 1.3s) arrives whole
// under registry.WithStream, its permit held until the stream is closed;
// a stream that stalls is cut by the idle bound. Before, the stream was
// cut at CALL_TIMEOUT (17/31 chunks).
func TestOpenAIStreamLongerThanCallTimeout(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/v1/long/chat/completions", chunks(40, 50*time.Millisecond, 0))
	mux.Handle("/v1/stall/chat/completions", chunks(40, 10*time.Millisecond, 3))
	up := outboundtest.NewUpstream(t, mux)
	s := newSDKs(t, up, false, "CONNECT_TIMEOUT", "100ms", "TLS_HANDSHAKE_TIMEOUT", "100ms",
		"READ_TIMEOUT", "200ms", "CALL_TIMEOUT", "1300ms")
	params := openai.ChatCompletionNewParams{Model: "gpt-x",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	stream := s.openai.Chat.Completions.NewStreaming(registry.WithStream(bounded(t), time.Second), params,
		option.WithBaseURL(up.URL+"/v1/long/"))
	n := 0
	for stream.Next() {
		if n++; n == 1 && s.oaiC.Status().InFlight != 1 {
			t.Errorf("in flight with the stream open = %d, want 1", s.oaiC.Status().InFlight)
		}
	}
	if err := stream.Err(); err != nil || n != 40 {
		t.Errorf("long stream: %d chunks, %v; want 40 and no error", n, err)
	}
	_ = stream.Close()

	stream = s.openai.Chat.Completions.NewStreaming(registry.WithStream(bounded(t), 150*time.Millisecond), params,
		option.WithBaseURL(up.URL+"/v1/stall/"))
	n = 0
	for stream.Next() {
		n++
	}
	var e *registry.Error
	if err := stream.Err(); !errors.As(err, &e) || e.Op != observe.OpIdleTimeout || n != 3 {
		t.Errorf("stalled stream: %d chunks, %v; want 3 and an idle timeout", n, err)
	}
	_ = stream.Close()
	if got := s.oaiC.Status().InFlight; got != 0 {
		t.Errorf("in flight after the streams closed = %d, want 0", got)
	}
}

// The other refusals through both SDKs, retries at their defaults: a full
// bulkhead and a budget spent before the call each end the SDK call with
// one refusal and no request.
func TestBulkheadAndBudgetRefusalsThroughSDK(t *testing.T) {
	t.Parallel()
	for _, which := range []string{"stripe", "openai"} {
		t.Run(which, func(t *testing.T) {
			t.Parallel()
			hang := outboundtest.NewHang(balanceOK)
			mux := http.NewServeMux()
			mux.Handle("/v1/hang", hang)
			mux.Handle("/", balanceOK)
			up := outboundtest.NewUpstream(t, mux)
			s := newSDKs(t, up, true, "MAX_CONCURRENT", "1")
			c := s.stripeC
			if which == "openai" {
				c = s.oaiC
			}
			ctx := bounded(t)
			// One call holds the only permit.
			held := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/hang", nil)
				resp, err := c.Do(req)
				if err == nil {
					_ = resp.Body.Close()
				}
				held <- err
			}()
			if err := hang.WaitFor(ctx, 1); err != nil {
				t.Fatal(err)
			}
			hits, before := up.Requests(), c.Status()
			if err := s.call(ctx, which); !errors.Is(sdk.Refusal(err), bulkhead.ErrFull) {
				t.Errorf("bulkhead full: %v, want the SDK's error carrying bulkhead.ErrFull", err)
			}
			hang.Release()
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond) // less than the 100ms reserve
			defer cancel()
			if err := s.call(short, which); !errors.Is(sdk.Refusal(err), capbudget.ErrExhausted) {
				t.Errorf("budget spent: %v, want the SDK's error carrying capbudget.ErrExhausted", err)
			}
			after := c.Status()
			if got := after.BulkheadRefused - before.BulkheadRefused; got != 1 {
				t.Errorf("%d bulkhead refusals for one SDK call, want 1", got)
			}
			if got := after.BudgetRefused - before.BudgetRefused; got != 1 {
				t.Errorf("%d budget refusals for one SDK call, want 1", got)
			}
			if up.Requests() != hits {
				t.Errorf("the refusals reached the upstream")
			}
		})
	}
}
