package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

// runAsBookstore, set in the environment of a copy of the test binary,
// makes that copy run the service's main (TestCheckConfigCommand): the
// binary's own command line, without building it.
const runAsBookstore = "BOOKSTORE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsBookstore) == "1" {
		main() // exits
	}
	goleak.VerifyTestMain(m)
}

// loadFrom loads the service's systems from env (names and values
// alternating), never from the process environment: tests run in
// parallel.
func loadFrom(env ...string) loadFunc {
	m := make(map[string]string, len(env)/2)
	for i := 0; i+1 < len(env); i += 2 {
		m[env[i]] = env[i+1]
	}
	return func(systems ...config.System) ([]config.Loaded, error) { return config.LoadEnv(m, systems...) }
}

// lockedBuffer collects the service's log.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// service is a running bookstore.
type service struct {
	url    string
	stop   context.CancelFunc
	code   chan int
	log    *lockedBuffer
	client *http.Client
}

// start runs the bookstore on 127.0.0.1:0 against the fake upstreams inv
// and pay, with env on top, and stops it (expecting exit 0) in
// t.Cleanup, then checks its registry clean: no permit held, no
// connection left open to either upstream.
func start(t *testing.T, inv, pay *outboundtest.Upstream, env ...string) *service {
	t.Helper()
	load := loadFrom(append([]string{"INVENTORY_BASE_URL", inv.URL, "PAYMENTS_BASE_URL", pay.URL}, env...)...)
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{stop: cancel, code: make(chan int, 1), log: &lockedBuffer{},
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}}
	type started struct {
		addr string
		reg  *registry.Registry
	}
	up := make(chan started, 1)
	go func() {
		s.code <- run(ctx, []string{"--addr", "127.0.0.1:0", "--shutdown-timeout", "5s"}, load, s.log,
			func(a string, reg *registry.Registry) { up <- started{a, reg} })
	}()
	var reg *registry.Registry
	select {
	case st := <-up:
		s.url, reg = "http://"+st.addr, st.reg
	case code := <-s.code:
		cancel()
		t.Fatalf("the service exited with %d at start:\n%s", code, s.log)
	}
	t.Cleanup(func() {
		s.client.CloseIdleConnections()
		s.stop()
		if code := s.wait(t); code != 0 {
			t.Errorf("exit %d after shutdown, want 0; log:\n%s", code, s.log)
		}
		registrytest.CheckClean(t, reg, inv, pay)
	})
	return s
}

func (s *service) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-s.code:
		s.code <- code // let a second wait see it
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("the service did not stop")
		return -1
	}
}

// order posts an order and returns the status, headers and decoded body.
func (s *service) order(t *testing.T, isbn string, qty int, header ...string) (int, http.Header, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"isbn": isbn, "qty": qty})
	req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("POST /orders: %v", err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		// capbudget.Middleware answers a spent budget in plain text.
		out = map[string]any{"raw": string(data)}
	}
	return resp.StatusCode, resp.Header, out
}

func (s *service) get(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	resp, err := s.client.Get(s.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// inventoryFake has 3 copies of every book but 9780000000000 (unknown).
func inventoryFake(t *testing.T) *outboundtest.Upstream {
	return outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isbn := strings.TrimPrefix(r.URL.Path, "/stock/")
		if isbn == "9780000000000" {
			http.Error(w, "unknown", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"isbn":"`+isbn+`","available":3}`)
	}))
}

// paymentsFake answers with replies in order (the last repeating) and records
// every request.
func paymentsFake(t *testing.T, replies ...outboundtest.Reply) (*outboundtest.Upstream, *outboundtest.Script) {
	script := outboundtest.NewScript(replies...)
	return outboundtest.NewUpstream(t, script), script
}

// authorized is the provider's answer to a payment it accepts, after
// delay.
func authorized(delay time.Duration) outboundtest.Reply {
	return outboundtest.Reply{Status: http.StatusCreated, Body: `{"id":"pay_1","status":"authorized"}`, Delay: delay}
}

func TestOrderPlaced(t *testing.T) {
	t.Parallel()
	inv := inventoryFake(t)
	pay, paid := paymentsFake(t, authorized(0))
	s := start(t, inv, pay)

	status, _, body := s.order(t, "9780441172719", 2, "Idempotency-Key", "cart-77")
	if status != http.StatusCreated || body["status"] != "paid" || body["payment_id"] != "pay_1" || body["amount_cents"] != 3998.0 {
		t.Fatalf("order: %d %v, want 201 paid", status, body)
	}
	rec := paid.Received()
	if len(rec) != 1 || rec[0].Header.Get("Idempotency-Key") != "order-"+body["id"].(string) {
		t.Fatalf("payments saw %+v, want one POST with Idempotency-Key order-%s", rec, body["id"])
	}
	// The same Idempotency-Key is the same order, so the same payment key.
	_, _, again := s.order(t, "9780441172719", 2, "Idempotency-Key", "cart-77")
	if again["id"] != body["id"] || paid.Received()[1].Header.Get("Idempotency-Key") != rec[0].Header.Get("Idempotency-Key") {
		t.Errorf("a repeated request became order %v, want %v with the same payment key", again["id"], body["id"])
	}

	for _, c := range []struct {
		isbn       string
		qty        int
		wantStatus int
		wantCode   string
	}{
		{"9780441172719", 4, http.StatusConflict, "out_of_stock"},
		{"9780000000000", 1, http.StatusNotFound, "unknown_book"},
		{"9780441172719", 0, http.StatusBadRequest, "invalid_order"},
	} {
		before := pay.Requests()
		status, _, body := s.order(t, c.isbn, c.qty)
		if status != c.wantStatus || body["error"] != c.wantCode {
			t.Errorf("order %s x%d: %d %v, want %d %s", c.isbn, c.qty, status, body, c.wantStatus, c.wantCode)
		}
		if pay.Requests() != before {
			t.Errorf("order %s x%d registered a payment", c.isbn, c.qty)
		}
	}

	if status, _ := s.get(t, "/healthz"); status != http.StatusOK {
		t.Errorf("/healthz: %d", status)
	}
	if status, body := s.get(t, "/readyz"); status != http.StatusOK || body["ready"] != true {
		t.Errorf("/readyz: %d %v", status, body)
	}
}

func TestOrderDegradedWhenPaymentsDown(t *testing.T) {
	t.Parallel()
	inv := inventoryFake(t)
	pay := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "maintenance"})
	s := start(t, inv, pay,
		"PAYMENTS_BREAKER_MIN_REQUESTS", "2", "PAYMENTS_BACKOFF_BASE", "1ms", "PAYMENTS_BACKOFF_MAX", "2ms")

	// The first order meets the 503s; the breaker opens during its
	// retries.
	status, hdr, body := s.order(t, "9780441172719", 1)
	if status != http.StatusServiceUnavailable || body["error"] != "payments_unavailable" || hdr.Get("Retry-After") == "" {
		t.Fatalf("order: %d %v (Retry-After %q), want 503 payments_unavailable with Retry-After", status, body, hdr.Get("Retry-After"))
	}
	if msg, _ := body["message"].(string); strings.Contains(msg, "127.0.0.1") {
		t.Errorf("the message leaks an internal address: %q", msg)
	}
	_, ready := s.get(t, "/readyz")
	if !strings.Contains(toJSON(ready), `"breaker":"open"`) {
		t.Fatalf("payments' breaker is not open: /readyz %v", ready)
	}

	// With the breaker open the next order is refused at once, with no
	// request to the provider.
	hits := pay.Requests()
	t0 := time.Now()
	status, _, body = s.order(t, "9780441172719", 1)
	if status != http.StatusServiceUnavailable || body["error"] != "payments_unavailable" {
		t.Fatalf("order with the breaker open: %d %v, want 503", status, body)
	}
	if pay.Requests() != hits {
		t.Errorf("the provider saw %d more requests with the breaker open, want 0", pay.Requests()-hits)
	}
	if el := time.Since(t0); el > time.Second {
		t.Errorf("the refusal took %v, want it at once", el)
	}
	if status, _ := s.get(t, "/readyz"); status != http.StatusOK {
		t.Errorf("/readyz: %d, want 200: the service degrades, it does not leave the Service", status)
	}
}

func TestOrderRejectedWhenBudgetSpent(t *testing.T) {
	t.Parallel()
	inv := inventoryFake(t)
	pay, _ := paymentsFake(t, authorized(0))
	s := start(t, inv, pay)
	for _, budget := range []string{"0", "50"} { // 50ms is less than the registry's 100ms reserve
		t0 := time.Now()
		status, _, body := s.order(t, "9780441172719", 1, "X-Time-Budget", budget)
		if status != http.StatusGatewayTimeout {
			t.Errorf("X-Time-Budget %s: %d %v, want 504", budget, status, body)
		}
		// At once: the upstreams are never asked (checked below); the
		// bound only leaves a loaded machine its slack.
		if el := time.Since(t0); el > 2*time.Second {
			t.Errorf("X-Time-Budget %s: answered after %v, want at once", budget, el)
		}
	}
	if inv.Requests() != 0 || pay.Requests() != 0 {
		t.Errorf("the upstreams saw %d and %d requests, want none", inv.Requests(), pay.Requests())
	}
}

func TestOrderBudgetRunsOutMidCall(t *testing.T) {
	t.Parallel()
	inv := inventoryFake(t)
	// The provider takes 10s: an order that waited for it instead of its
	// 400ms budget would take that long, far beyond the slack a loaded
	// machine needs.
	pay, _ := paymentsFake(t, authorized(10*time.Second))
	s := start(t, inv, pay)
	t0 := time.Now()
	status, _, body := s.order(t, "9780441172719", 1, "X-Time-Budget", "400")
	if status != http.StatusGatewayTimeout || body["error"] != "no_time_left" {
		t.Errorf("order: %d %v, want 504 no_time_left", status, body)
	}
	if el := time.Since(t0); el > 5*time.Second {
		t.Errorf("answered after %v, want within the 400ms budget (and some slack), not the provider's 10s", el)
	}
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	inv := inventoryFake(t)
	pay, _ := paymentsFake(t, authorized(300*time.Millisecond))
	s := start(t, inv, pay)
	type result struct {
		status int
		body   map[string]any
	}
	done := make(chan result, 1)
	go func() {
		status, _, body := s.order(t, "9780441172719", 1)
		done <- result{status, body}
	}()
	for deadline := time.Now().Add(5 * time.Second); pay.Requests() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the payment request never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.stop() // SIGTERM while the order is in flight
	r := <-done
	if r.status != http.StatusCreated {
		t.Errorf("the order in flight at shutdown got %d %v, want 201", r.status, r.body)
	}
	if code := s.wait(t); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
}

func TestBadEnvironmentStopsAtStart(t *testing.T) {
	t.Parallel()
	load := loadFrom("PAYMENTS_BASE_URL", "ftp://user:hunter2@pay.internal", "PAYMENTS_READ_TIMEOUT", "90s", "INVENTORY_CONECT_TIMEOUT", "1s")
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--addr", "127.0.0.1:0"}, load, &stderr,
		func(string, *registry.Registry) { t.Error("the service started") })
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	out := stderr.String()
	for _, want := range []string{"cannot start", "INVENTORY_BASE_URL", "PAYMENTS_BASE_URL", "PAYMENTS_READ_TIMEOUT=", "INVENTORY_CONECT_TIMEOUT"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("the report leaks a password:\n%s", out)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The provider's Retry-After reaches the service's own client even when
// the order's budget is too short to wait for it.
func TestProviderRetryAfterPassedOn(t *testing.T) {
	t.Parallel()
	inv := inventoryFake(t)
	pay := outboundtest.NewUpstream(t, outboundtest.Throttle(time.Second))
	s := start(t, inv, pay)
	status, hdr, body := s.order(t, "9780441172719", 1, "X-Time-Budget", "700")
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "1" {
		t.Fatalf("order: %d %v (Retry-After %q), want 503 with the provider's Retry-After: 1", status, body, hdr.Get("Retry-After"))
	}
}
