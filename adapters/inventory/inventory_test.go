package inventory_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newAdapter loads inventory.System from the environment, as a service
// does, with INVENTORY_BASE_URL pointing at baseURL and env on top.
func newAdapter(t *testing.T, baseURL string, env map[string]string) *inventory.Adapter {
	t.Helper()
	t.Setenv("INVENTORY_BASE_URL", baseURL)
	for k, v := range env {
		t.Setenv(k, v)
	}
	reg, err := registry.FromEnv(inventory.System)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return inventory.New(reg.MustClient(inventory.Name))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSystemDefaults(t *testing.T) {
	t.Setenv("INVENTORY_BASE_URL", "http://inventory.internal")
	loaded, err := config.Load(inventory.System)
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
	tests := []struct {
		name      string
		steps     []testutil.Resp
		isbn      string
		want      int
		wantHits  int
		wantPath  string
		unknown   bool
		degrade   bool
		wantError bool
	}{
		{name: "in stock", steps: []testutil.Resp{{Body: `{"isbn":"9780441172719","available":12}`}},
			isbn: "9780441172719", want: 12, wantHits: 1, wantPath: "/stock/9780441172719"},
		{name: "sold out", steps: []testutil.Resp{{Body: `{"isbn":"9780441172719","available":0}`}},
			isbn: "9780441172719", want: 0, wantHits: 1},
		{name: "isbn with slash and space is one segment", steps: []testutil.Resp{{Body: `{"available":1}`}},
			isbn: "978/0 1", want: 1, wantHits: 1, wantPath: "/stock/978%2F0%201"},
		{name: "two 503 then ok", steps: append(testutil.FailN(2, 503)[:2], testutil.Resp{Body: `{"available":3}`}),
			isbn: "1", want: 3, wantHits: 3},
		{name: "unknown book", steps: []testutil.Resp{{Status: 404, Body: "no such isbn"}},
			isbn: "0000000000", wantHits: 1, unknown: true, wantError: true},
		{name: "down: 503 until retries run out", steps: []testutil.Resp{{Status: 503}},
			isbn: "1", wantHits: 3, degrade: true, wantError: true},
		{name: "bad request is not retried", steps: []testutil.Resp{{Status: 400}},
			isbn: "1", wantHits: 1, wantError: true},
		{name: "answer without available", steps: []testutil.Resp{{Body: `{"isbn":"1"}`}},
			isbn: "1", wantHits: 1, wantError: true},
		{name: "negative available", steps: []testutil.Resp{{Body: `{"available":-2}`}},
			isbn: "1", wantHits: 1, wantError: true},
		{name: "empty isbn sends nothing", isbn: "", wantHits: 0, unknown: true, wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testutil.Script(t, tt.steps...)
			var rawPath atomic.Pointer[string]
			srv.Config.Handler = wrapPath(srv.Config.Handler, &rawPath)
			a := newAdapter(t, srv.URL, map[string]string{"INVENTORY_BACKOFF_BASE": "1ms", "INVENTORY_BACKOFF_MAX": "2ms"})
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
			if srv.Hits() != tt.wantHits {
				t.Errorf("upstream saw %d requests, want %d", srv.Hits(), tt.wantHits)
			}
			if p := rawPath.Load(); tt.wantPath != "" && (p == nil || *p != tt.wantPath) {
				t.Errorf("path %v, want %s", p, tt.wantPath)
			}
		})
	}
}

// wrapPath records the escaped path of the last request.
func wrapPath(h http.Handler, path *atomic.Pointer[string]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		path.Store(&p)
		h.ServeHTTP(w, r)
	})
}

func TestStockReadTimeoutTripsBreaker(t *testing.T) {
	srv := testutil.NewServer(t, testutil.SlowHeaders())
	a := newAdapter(t, srv.URL, map[string]string{
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
	if n := srv.Requests(); n != 2 {
		t.Errorf("upstream saw %d requests, want 2: an open breaker sends nothing", n)
	}
}
