package outbound_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// e2eSetenv applies env with t.Setenv (restored when the test ends).
func e2eSetenv(t *testing.T, env map[string]string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// e2eDo sends a GET through do under a 5s bound and returns the status
// and body.
func e2eDo(t *testing.T, do func(*http.Request) (*http.Response, error), url string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of %s: %v", url, err)
	}
	return resp.StatusCode, string(b), nil
}

// Two systems declared in the environment: a healthy one and one that
// always answers 503. Each gets its own client; the failing one retries
// once and hands back its last 503.
func TestRegistryEndToEnd(t *testing.T) {
	inventory := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "inventory "+r.URL.Path)
	}))
	defer inventory.Close()
	var paymentHits atomic.Int64
	payments := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paymentHits.Add(1)
		http.Error(w, "payments down", http.StatusServiceUnavailable)
	}))
	defer payments.Close()

	e2eSetenv(t, map[string]string{
		"OUTBOUND_SYSTEMS":      "inventory,payments",
		"INVENTORY_BASE_URL":    inventory.URL + "/api/v1",
		"PAYMENTS_BASE_URL":     payments.URL,
		"PAYMENTS_RETRIES":      "1",
		"PAYMENTS_BACKOFF_BASE": "5ms",
		"PAYMENTS_BACKOFF_MAX":  "10ms",
	})
	reg, err := registry.FromEnv()
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	defer reg.Close()
	if got := strings.Join(reg.Names(), ","); got != "inventory,payments" {
		t.Errorf("Names() = %s, want inventory,payments", got)
	}

	inv, err := reg.Client("inventory")
	if err != nil {
		t.Fatal(err)
	}
	// A relative URL is joined to BASE_URL's path.
	status, body, err := e2eDo(t, inv.Do, "stock/42")
	if err != nil || status != http.StatusOK || body != "inventory /api/v1/stock/42" {
		t.Errorf("Do(stock/42) = %d %q, %v; want 200 \"inventory /api/v1/stock/42\"", status, body, err)
	}
	// HTTPClient runs the same pipeline for absolute URLs.
	status, body, err = e2eDo(t, inv.HTTPClient().Do, inventory.URL+"/health")
	if err != nil || status != http.StatusOK || body != "inventory /health" {
		t.Errorf("HTTPClient().Do(/health) = %d %q, %v; want 200 \"inventory /health\"", status, body, err)
	}

	pay := reg.MustClient("payments")
	status, body, err = e2eDo(t, pay.Do, "/charge")
	if err != nil || status != http.StatusServiceUnavailable || !strings.Contains(body, "payments down") {
		t.Errorf("payments = %d %q, %v; want the last 503 with its body", status, body, err)
	}
	if n := paymentHits.Load(); n != 2 {
		t.Errorf("payments saw %d requests, want 2 (1 + RETRIES=1)", n)
	}
	// The failing system did not touch the healthy one.
	if st := inv.Status(); st.Retries != 0 || st.Calls != 2 || st.OK != 2 {
		t.Errorf("inventory Status(): Calls %d OK %d Retries %d; want 2, 2, 0", st.Calls, st.OK, st.Retries)
	}

	_, err = reg.Client("billing")
	if !errors.Is(err, registry.ErrUnknownSystem) {
		t.Errorf("Client(billing) = %v, want ErrUnknownSystem", err)
	} else if !strings.Contains(err.Error(), "inventory") || !strings.Contains(err.Error(), "payments") {
		t.Errorf("unknown-system error %q does not list the known systems", err)
	}

	// After Close, every call fails at once with ErrClosed, sending nothing.
	if err := reg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	before := paymentHits.Load()
	for name, do := range map[string]func(*http.Request) (*http.Response, error){
		"inventory Do": inv.Do, "inventory HTTPClient": inv.HTTPClient().Do, "payments Do": pay.Do,
	} {
		url := "/x"
		if strings.Contains(name, "HTTPClient") {
			url = inventory.URL + "/x"
		}
		if _, _, err := e2eDo(t, do, url); !errors.Is(err, registry.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if n := paymentHits.Load(); n != before {
		t.Errorf("payments saw %d requests after Close", n-before)
	}
}

// Bad settings of two systems are reported together: one error naming
// every bad variable, and no registry.
func TestRegistryBadEnv(t *testing.T) {
	e2eSetenv(t, map[string]string{
		"OUTBOUND_SYSTEMS":          "inventory,payments",
		"INVENTORY_BASE_URL":        "http://inventory.internal",
		"INVENTORY_CONNECT_TIMEOUT": "soon",
		"INVENTORY_RETRIES":         "11",
		"PAYMENTS_BASE_URL":         "ftp://payments.internal",
	})
	reg, err := registry.FromEnv()
	if reg != nil {
		reg.Close()
		t.Fatal("FromEnv returned a registry for a bad environment")
	}
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("FromEnv error %v does not match config.ErrInvalid", err)
	}
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("FromEnv error %T is not a *config.Error", err)
	}
	want := []string{"INVENTORY_CONNECT_TIMEOUT", "INVENTORY_RETRIES", "PAYMENTS_BASE_URL"}
	var got []string
	for _, p := range cerr.Problems {
		got = append(got, p.Var)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("problems name %v, want exactly %v", got, want)
	}
	for _, v := range want {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error text does not name %s:\n%v", v, err)
		}
	}
	t.Logf("%v", err)
}
