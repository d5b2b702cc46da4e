package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// callOutcomes records the outcomes of calls.
type callOutcomes struct {
	mu  sync.Mutex
	got []observe.Outcome
}

func (o *callOutcomes) ObserveAttempt(observe.AttemptEvent) {}

func (o *callOutcomes) ObserveCall(ev observe.CallEvent) {
	o.mu.Lock()
	o.got = append(o.got, ev.Outcome)
	o.mu.Unlock()
}

func (o *callOutcomes) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}

func (o *callOutcomes) last() observe.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got[len(o.got)-1]
}

// Through HTTPClient, a refusal by the breaker, the bulkhead or the budget
// is a made-up 503 that SDKs do not retry, with no I/O (an error there
// would be retried by the SDK with its own backoff, 1.4s per call); Do
// still returns the typed error, and observers see the refusal, not a
// 503.
func TestHTTPClientAnswersRefusalsWithA503SDKsDoNotRetry(t *testing.T) {
	t.Parallel()
	hang := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusServiceUnavailable})
	mux := http.NewServeMux()
	mux.Handle("/hang", hang)
	mux.Handle("/", outboundtest.Reply{Status: http.StatusServiceUnavailable})
	up := outboundtest.NewUpstream(t, mux)
	obs := &callOutcomes{}
	reg := loadRegistry(t, payEnv(up.URL, "RETRIES", "0", "BREAKER_MIN_REQUESTS", "1",
		"BREAKER_OPEN_TIMEOUT", "1h", "MAX_CONCURRENT", "1"), WithObserver(obs))
	c := reg.MustClient("pay")
	hc := c.HTTPClient()
	ctx := tbrCtx(t, 10*time.Second)

	check := func(name string, status int, h http.Header, body string, err error, reason string, sentinel error, out observe.Outcome) {
		t.Helper()
		if err != nil || status != http.StatusServiceUnavailable {
			t.Fatalf("%s: HTTPClient gave %d, %v; want the refusal 503", name, status, err)
		}
		for k, want := range map[string]string{"X-Should-Retry": "false", "Stripe-Should-Retry": "false",
			RefusedHeader: reason, "X-Outbound-System": "pay"} {
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
		if e := Refusal(h); !errors.Is(e, sentinel) {
			t.Errorf("%s: Refusal(header) = %v, want it to match %v", name, e, sentinel)
		}
		if got := obs.last(); got != out {
			t.Errorf("%s: observers saw %v, want %v", name, got, out)
		}
	}

	// Bulkhead full: one call hangs with the only permit.
	held := make(chan error, 1)
	go func() {
		_, _, _, err := sendRead(ctx, t, hc.Do, http.MethodGet, "/hang", nil)
		held <- err
	}()
	if err := hang.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	status, h, body, err := sendRead(ctx, t, hc.Do, http.MethodGet, "/x", nil)
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
	status, h, body, err = sendRead(ctx, t, hc.Do, http.MethodGet, "/x", nil)
	check("breaker open", status, h, body, err, "breaker-open", ErrCircuitOpen, observe.OutcomeBreakerOpen)
	if h.Get("Retry-After") != "3600" {
		t.Errorf("breaker open: Retry-After %q, want 3600 (BREAKER_OPEN_TIMEOUT)", h.Get("Retry-After"))
	}
	// Budget spent: 50ms left is less than the 100ms reserve.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	status, h, body, err = sendRead(short, t, hc.Do, http.MethodGet, "/x", nil)
	check("budget spent", status, h, body, err, "budget-spent", capbudget.ErrExhausted, observe.OutcomeBudgetSpent)
	if got := up.Requests(); got != hits {
		t.Errorf("the refusals reached the upstream: %d requests, want %d", got, hits)
	}

	// Do keeps its typed error.
	if _, _, _, err := sendRead(ctx, t, c.Do, http.MethodGet, "/x", nil); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("Do with the breaker open: %v, want ErrCircuitOpen", err)
	}
}

// An upstream cannot forge a refusal: HTTPClient removes the marker from
// its responses.
func TestUpstreamCannotForgeARefusal(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: 503,
		Header: http.Header{RefusedHeader: {"breaker-open"}}})
	reg := loadRegistry(t, payEnv(up.URL, "RETRIES", "0"))
	c := reg.MustClient("pay")
	_, h, _, err := sendRead(tbrCtx(t, 10*time.Second), t, c.HTTPClient().Do, http.MethodGet, "/", nil)
	if err != nil || h.Get(RefusedHeader) != "" || Refusal(h) != nil {
		t.Errorf("upstream's marker came through: %v, %v", h, err)
	}
}

// A call cut by the caller's budget is answered, through HTTPClient, like
// a budget refused up front, so that no SDK retries past the caller's
// deadline.
func TestBudgetCutCallIsARefusalThroughHTTPClient(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
	reg := loadRegistry(t, payEnv(up.URL, "RETRIES", "0"))
	c := reg.MustClient("pay")
	ctx, cancel := context.WithTimeout(tbrCtx(t, 10*time.Second), 300*time.Millisecond)
	defer cancel()
	status, h, _, err := sendRead(ctx, t, c.HTTPClient().Do, http.MethodGet, "/", nil)
	if err != nil || status != 503 || h.Get(RefusedHeader) != "budget-spent" {
		t.Fatalf("budget cut through HTTPClient: %d %v %v, want the budget-spent refusal", status, h, err)
	}
	if e := Refusal(h); !errors.Is(e, context.DeadlineExceeded) || !errors.Is(e, capbudget.ErrExhausted) {
		t.Errorf("Refusal = %v, want a spent budget", e)
	}
}
