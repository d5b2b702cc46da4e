package payments_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newAdapter loads payments.System from the environment, as a service
// does, with PAYMENTS_BASE_URL pointing at baseURL and env on top.
func newAdapter(t *testing.T, baseURL string, env map[string]string) *payments.Adapter {
	t.Helper()
	t.Setenv("PAYMENTS_BASE_URL", baseURL)
	for k, v := range env {
		t.Setenv(k, v)
	}
	reg, err := registry.FromEnv(payments.System)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return payments.New(reg.MustClient(payments.Name))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fastBackoff keeps retries quick in tests.
var fastBackoff = map[string]string{"PAYMENTS_BACKOFF_BASE": "1ms", "PAYMENTS_BACKOFF_MAX": "2ms"}

const wantBody = `{"order_id":"42","amount_cents":1999}`

func TestSystemDefaults(t *testing.T) {
	t.Setenv("PAYMENTS_BASE_URL", "https://pay.example")
	loaded, err := config.Load(payments.System)
	if err != nil {
		t.Fatalf("the code defaults must be valid: %v", err)
	}
	c := loaded[0].Client
	if c.ReadTimeout != 20*time.Second || c.CallTimeout != 30*time.Second {
		t.Errorf("read %v, call %v; want 20s and 30s", c.ReadTimeout, c.CallTimeout)
	}
	if c.Retries == 0 {
		t.Error("retries 0: payments rely on the Idempotency-Key to retry")
	}
}

func TestRegister(t *testing.T) {
	srv := testutil.Script(t, testutil.Resp{Status: http.StatusCreated, Body: `{"id":"pay_1","status":"authorized"}`})
	a := newAdapter(t, srv.URL+"/v2", nil)
	id, err := a.Register(ctxT(t), "42", 1999)
	if err != nil || id != "pay_1" {
		t.Fatalf("Register = %q, %v; want pay_1", id, err)
	}
	r := srv.Received()[0]
	if r.Method != http.MethodPost || r.Path != "/v2/payments" {
		t.Errorf("request %s %s, want POST /v2/payments", r.Method, r.Path)
	}
	if got := r.Header.Get("Idempotency-Key"); got != "order-42" {
		t.Errorf("Idempotency-Key %q, want order-42", got)
	}
	if string(r.Body) != wantBody {
		t.Errorf("body %s, want %s", r.Body, wantBody)
	}
}

// TestRegisterRetriesWithSameKey is the reason payments may retry a POST:
// every attempt carries the same Idempotency-Key and the same body, so
// the provider recognises the replay and charges once.
func TestRegisterRetriesWithSameKey(t *testing.T) {
	tests := []struct {
		name  string
		first testutil.Resp
		env   map[string]string
	}{
		{name: "after a 503", first: testutil.Resp{Status: http.StatusServiceUnavailable, Body: "try again"}},
		{name: "after a 429 with Retry-After", first: testutil.Resp{Status: http.StatusTooManyRequests, Header: testutil.RetryAfterSeconds(1)}},
		{name: "after a read timeout", first: testutil.Resp{Handler: testutil.SlowHeaders()}, env: map[string]string{
			"PAYMENTS_CONNECT_TIMEOUT": "100ms", "PAYMENTS_TLS_HANDSHAKE_TIMEOUT": "200ms", "PAYMENTS_READ_TIMEOUT": "300ms",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testutil.Script(t, tt.first, testutil.Resp{Status: http.StatusCreated, Body: `{"id":"pay_7"}`})
			env := map[string]string{}
			for k, v := range fastBackoff {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			a := newAdapter(t, srv.URL, env)
			id, err := a.Register(ctxT(t), "42", 1999)
			if err != nil || id != "pay_7" {
				t.Fatalf("Register = %q, %v; want pay_7 after one retry", id, err)
			}
			rec := srv.Received()
			if len(rec) != 2 {
				t.Fatalf("provider saw %d requests, want 2", len(rec))
			}
			for i, r := range rec {
				if k := r.Header.Get("Idempotency-Key"); k != "order-42" {
					t.Errorf("attempt %d: Idempotency-Key %q, want order-42", i+1, k)
				}
				if string(r.Body) != wantBody {
					t.Errorf("attempt %d: body %s, want %s", i+1, r.Body, wantBody)
				}
			}
		})
	}
}

func TestRegisterFailures(t *testing.T) {
	tests := []struct {
		name     string
		steps    []testutil.Resp
		order    string
		amount   int64
		wantHits int
		declined bool
		degrade  bool
	}{
		{name: "declined 402", steps: []testutil.Resp{{Status: 402, Body: `{"reason":"card declined"}`}},
			order: "1", amount: 100, wantHits: 1, declined: true},
		{name: "declined 422", steps: []testutil.Resp{{Status: 422}}, order: "1", amount: 100, wantHits: 1, declined: true},
		{name: "down: 503 until retries run out", steps: []testutil.Resp{{Status: 503}},
			order: "1", amount: 100, wantHits: 3, degrade: true},
		{name: "conflict is not degradable", steps: []testutil.Resp{{Status: 409}}, order: "1", amount: 100, wantHits: 1},
		{name: "answer without id", steps: []testutil.Resp{{Status: 201, Body: `{}`}}, order: "1", amount: 100, wantHits: 1},
		{name: "empty order sends nothing", order: "", amount: 100},
		{name: "zero amount sends nothing", order: "1", amount: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testutil.Script(t, tt.steps...)
			a := newAdapter(t, srv.URL, fastBackoff)
			id, err := a.Register(ctxT(t), tt.order, tt.amount)
			if err == nil {
				t.Fatalf("Register = %q, nil; want an error", id)
			}
			if got := errors.Is(err, payments.ErrDeclined); got != tt.declined {
				t.Errorf("errors.Is(%v, ErrDeclined) = %v, want %v", err, got, tt.declined)
			}
			if got := adapters.Degradable(err); got != tt.degrade {
				t.Errorf("Degradable(%v) = %v, want %v", err, got, tt.degrade)
			}
			if srv.Hits() != tt.wantHits {
				t.Errorf("provider saw %d requests, want %d", srv.Hits(), tt.wantHits)
			}
		})
	}
}

func TestRegisterBudgetSpent(t *testing.T) {
	srv := testutil.Script(t, testutil.Resp{Status: 201, Body: `{"id":"p"}`})
	a := newAdapter(t, srv.URL, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := a.Register(ctx, "9", 100)
	var re *registry.Error
	if !errors.As(err, &re) || re.Op != registry.OpBudget || !adapters.Degradable(err) {
		t.Fatalf("err = %v, want a degradable spent budget", err)
	}
	if srv.Hits() != 0 {
		t.Errorf("provider saw %d requests, want 0", srv.Hits())
	}
}
