package inventory_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newAdapter builds inventory.System from env, as a service does from its
// environment, with INVENTORY_BASE_URL pointing at up; the registry is
// closed, and checked clean, at the end of the test.
func newAdapter(t *testing.T, up *outboundtest.Upstream, env map[string]string) *inventory.Adapter {
	t.Helper()
	vars := map[string]string{"INVENTORY_BASE_URL": up.URL}
	maps.Copy(vars, env)
	reg := registrytest.New(t, vars, registrytest.Systems(inventory.System), registrytest.Watch(up))
	return inventory.New(reg.MustClient(inventory.Name))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSystemDefaults(t *testing.T) {
	t.Parallel()
	loaded, err := config.LoadEnv(map[string]string{"INVENTORY_BASE_URL": "http://inventory.internal"}, inventory.System)
	if err != nil {
		t.Fatalf("the code defaults must be valid: %v", err)
	}
	l := loaded[0]
	if l.Client.ReadTimeout != 2*time.Second || l.SourceOf("READ_TIMEOUT") != config.FromCode {
		t.Errorf("read timeout %v from %v, want 2s from code", l.Client.ReadTimeout, l.SourceOf("READ_TIMEOUT"))
	}
	if l.Client.Retries != config.Baseline().Retries {
		t.Errorf("retries %d, want the baseline: GET is safe to retry", l.Client.Retries)
	}
}

func TestStock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		steps     []outboundtest.Reply
		isbn      string
		want      int
		wantHits  int
		wantPath  string
		unknown   bool
		degrade   bool
		wantError bool
	}{
		{name: "in stock", steps: []outboundtest.Reply{{Body: `{"isbn":"9780441172719","available":12}`}},
			isbn: "9780441172719", want: 12, wantHits: 1, wantPath: "/stock/9780441172719"},
		{name: "sold out", steps: []outboundtest.Reply{{Body: `{"isbn":"9780441172719","available":0}`}},
			isbn: "9780441172719", want: 0, wantHits: 1},
		{name: "isbn with slash and space is one segment", steps: []outboundtest.Reply{{Body: `{"available":1}`}},
			isbn: "978/0 1", want: 1, wantHits: 1, wantPath: "/stock/978%2F0%201"},
		{name: "two 503 then ok", steps: []outboundtest.Reply{{Status: 503}, {Status: 503}, {Body: `{"available":3}`}},
			isbn: "1", want: 3, wantHits: 3},
		{name: "unknown book", steps: []outboundtest.Reply{{Status: 404, Body: "no such isbn"}},
			isbn: "0000000000", wantHits: 1, unknown: true, wantError: true},
		{name: "down: 503 until retries run out", steps: []outboundtest.Reply{{Status: 503}},
			isbn: "1", wantHits: 3, degrade: true, wantError: true},
		{name: "bad request is not retried", steps: []outboundtest.Reply{{Status: 400}},
			isbn: "1", wantHits: 1, wantError: true},
		{name: "answer without available", steps: []outboundtest.Reply{{Body: `{"isbn":"1"}`}},
			isbn: "1", wantHits: 1, wantError: true},
		{name: "negative available", steps: []outboundtest.Reply{{Body: `{"available":-2}`}},
			isbn: "1", wantHits: 1, wantError: true},
		{name: "empty isbn sends nothing", isbn: "", wantHits: 0, unknown: true, wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			script := outboundtest.NewScript(tt.steps...)
			a := newAdapter(t, outboundtest.NewUpstream(t, script), map[string]string{"INVENTORY_BACKOFF_BASE": "1ms", "INVENTORY_BACKOFF_MAX": "2ms"})
			got, err := a.Stock(ctxT(t), tt.isbn)
			if (err != nil) != tt.wantError {
				t.Fatalf("Stock(%q) = %d, %v; want error %v", tt.isbn, got, err, tt.wantError)
			}
			if err == nil && got != tt.want {
				t.Errorf("Stock(%q) = %d, want %d", tt.isbn, got, tt.want)
			}
			if got := errors.Is(err, inventory.ErrUnknownBook); got != tt.unknown {
				t.Errorf("errors.Is(%v, ErrUnknownBook) = %v, want %v", err, got, tt.unknown)
			}
			if got := adapters.Degradable(err); got != tt.degrade {
				t.Errorf("Degradable(%v) = %v, want %v", err, got, tt.degrade)
			}
			rec := script.Received()
			if len(rec) != tt.wantHits {
				t.Errorf("upstream saw %d requests, want %d", len(rec), tt.wantHits)
			}
			if tt.wantPath != "" && (len(rec) == 0 || rec[0].EscapedPath != tt.wantPath) {
				t.Errorf("requests %+v, want the path %s", rec, tt.wantPath)
			}
		})
	}
}

func TestStockReadTimeoutTripsBreaker(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
	a := newAdapter(t, up, map[string]string{
		"INVENTORY_CONNECT_TIMEOUT":       "50ms",
		"INVENTORY_TLS_HANDSHAKE_TIMEOUT": "100ms",
		"INVENTORY_READ_TIMEOUT":          "100ms",
		"INVENTORY_RETRIES":               "0",
		"INVENTORY_BREAKER_MIN_REQUESTS":  "2",
	})
	for i := range 2 {
		_, err := a.Stock(ctxT(t), "1")
		var re *registry.Error
		if !errors.As(err, &re) || !re.Timeout() || !adapters.Degradable(err) {
			t.Fatalf("call %d: err = %v, want a degradable read timeout", i+1, err)
		}
	}
	start := time.Now()
	_, err := a.Stock(ctxT(t), "1")
	if !errors.Is(err, registry.ErrCircuitOpen) || !adapters.Degradable(err) {
		t.Fatalf("err = %v, want a degradable open breaker", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("an open breaker took %v to refuse, want at once", el)
	}
	if n := up.Requests(); n != 2 {
		t.Errorf("upstream saw %d requests, want 2: an open breaker sends nothing", n)
	}
}
