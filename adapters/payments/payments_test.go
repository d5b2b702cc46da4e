package payments_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newAdapter builds payments.System from env, as a service does from its
// environment, with PAYMENTS_BASE_URL pointing at up (path appended); the
// registry is closed, and checked clean, at the end of the test.
func newAdapter(t *testing.T, up *outboundtest.Upstream, path string, env map[string]string) *payments.Adapter {
	t.Helper()
	vars := map[string]string{"PAYMENTS_BASE_URL": up.URL + path}
	maps.Copy(vars, env)
	reg := registrytest.New(t, vars, registrytest.Systems(payments.System), registrytest.Watch(up))
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
	t.Parallel()
	loaded, err := config.LoadEnv(map[string]string{"PAYMENTS_BASE_URL": "https://pay.example"}, payments.System)
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
	t.Parallel()
	script := outboundtest.NewScript(outboundtest.Reply{Status: http.StatusCreated, Body: `{"id":"pay_1","status":"authorized"}`})
	a := newAdapter(t, outboundtest.NewUpstream(t, script), "/v2", nil)
	id, err := a.Register(ctxT(t), "42", 1999)
	if err != nil || id != "pay_1" {
		t.Fatalf("Register = %q, %v; want pay_1", id, err)
	}
	r := script.Received()[0]
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
	t.Parallel()
	tests := []struct {
		name  string
		first outboundtest.Reply
		env   map[string]string
	}{
		{name: "after a 503", first: outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "try again"}},
		{name: "after a 429 with Retry-After", first: outboundtest.Throttle(time.Second)},
		{name: "after a read timeout", first: outboundtest.SlowHeaders(time.Minute), env: map[string]string{
			"PAYMENTS_CONNECT_TIMEOUT": "100ms", "PAYMENTS_TLS_HANDSHAKE_TIMEOUT": "200ms", "PAYMENTS_READ_TIMEOUT": "300ms",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			script := outboundtest.NewScript(tt.first, outboundtest.Reply{Status: http.StatusCreated, Body: `{"id":"pay_7"}`})
			env := maps.Clone(fastBackoff)
			maps.Copy(env, tt.env)
			a := newAdapter(t, outboundtest.NewUpstream(t, script), "", env)
			id, err := a.Register(ctxT(t), "42", 1999)
			if err != nil || id != "pay_7" {
				t.Fatalf("Register = %q, %v; want pay_7 after one retry", id, err)
			}
			rec := script.Received()
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
	t.Parallel()
	tests := []struct {
		name     string
		steps    []outboundtest.Reply
		order    string
		amount   int64
		wantHits int
		declined bool
		degrade  bool
	}{
		{name: "declined 402", steps: []outboundtest.Reply{{Status: 402, Body: `{"reason":"card declined"}`}},
			order: "1", amount: 100, wantHits: 1, declined: true},
		{name: "declined 422", steps: []outboundtest.Reply{{Status: 422}}, order: "1", amount: 100, wantHits: 1, declined: true},
		{name: "down: 503 until retries run out", steps: []outboundtest.Reply{{Status: 503}},
			order: "1", amount: 100, wantHits: 3, degrade: true},
		{name: "conflict is not degradable", steps: []outboundtest.Reply{{Status: 409}}, order: "1", amount: 100, wantHits: 1},
		{name: "answer without id", steps: []outboundtest.Reply{{Status: 201, Body: `{}`}}, order: "1", amount: 100, wantHits: 1},
		{name: "empty order sends nothing", order: "", amount: 100},
		{name: "zero amount sends nothing", order: "1", amount: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			script := outboundtest.NewScript(tt.steps...)
			a := newAdapter(t, outboundtest.NewUpstream(t, script), "", fastBackoff)
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
			if script.Hits() != tt.wantHits {
				t.Errorf("provider saw %d requests, want %d", script.Hits(), tt.wantHits)
			}
		})
	}
}

func TestRegisterBudgetSpent(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: 201, Body: `{"id":"p"}`})
	a := newAdapter(t, up, "", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := a.Register(ctx, "9", 100)
	var re *registry.Error
	if !errors.As(err, &re) || re.Op != observe.OpBudget || !adapters.Degradable(err) {
		t.Fatalf("err = %v, want a degradable spent budget", err)
	}
	if up.Requests() != 0 {
		t.Errorf("provider saw %d requests, want 0", up.Requests())
	}
}
