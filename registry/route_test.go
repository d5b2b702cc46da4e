package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/outboundtest"
)

// routeEnv is a system "payments" on up with routes, plus extra.
func routeEnv(up string, extra map[string]string) map[string]string {
	env := map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up + "/v1",
		"PAYMENTS_BACKOFF_BASE": "1ms", "PAYMENTS_BACKOFF_MAX": "2ms",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func routeCall(t *testing.T, c *Client, method, path, body string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// A route's READ_TIMEOUT cuts its slow endpoint, while another endpoint of
// the same system, as slow, waits the system's READ_TIMEOUT and answers.
// What is judged is what the client did: the slow route's call ends as a
// read timeout after one attempt per try, the other gets its answer.
func TestRouteReadTimeoutCutsOnlyItsEndpoint(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if outboundtest.Wait(r, 300*time.Millisecond) {
			_, _ = io.WriteString(w, "late")
		}
	}))
	r := loadRegistry(t, routeEnv(up.URL, map[string]string{
		"PAYMENTS_CONNECT_TIMEOUT": "20ms", "PAYMENTS_TLS_HANDSHAKE_TIMEOUT": "20ms",
		"PAYMENTS_READ_TIMEOUT": "5s", "PAYMENTS_RETRIES": "0",
		"PAYMENTS_ROUTES": "quote", "PAYMENTS_ROUTE_QUOTE_MATCH": "GET /v1/quotes/{id}",
		"PAYMENTS_ROUTE_QUOTE_READ_TIMEOUT": "50ms",
	}))
	c, _ := r.Client("payments")

	_, _, err := routeCall(t, c, http.MethodGet, "/quotes/7", "")
	var e *Error
	if !errors.As(err, &e) || e.Op.String() != "read timeout" {
		t.Fatalf("GET /v1/quotes/7: %v, want a read timeout from the route's 50ms", err)
	}
	status, body, err := routeCall(t, c, http.MethodGet, "/charges/7", "")
	if err != nil || status != 200 || body != "late" {
		t.Fatalf("GET /v1/charges/7: %d %q %v, want 200 late (the system's 5s)", status, body, err)
	}
	st := c.Status()
	if len(st.Routes) != 1 || st.Routes[0].Calls != 1 || st.Calls != 2 {
		t.Errorf("status: routes %+v, calls %d; want the quote route with 1 call of 2", st.Routes, st.Calls)
	}
}

// A route may wait longer than its system: the transport's header
// timeout is the longest of them, and the system's own calls are still
// cut at the system's READ_TIMEOUT.
func TestRouteMayWaitLongerThanItsSystem(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if outboundtest.Wait(r, 300*time.Millisecond) {
			_, _ = io.WriteString(w, "late")
		}
	}))
	r := loadRegistry(t, routeEnv(up.URL, map[string]string{
		"PAYMENTS_CONNECT_TIMEOUT": "20ms", "PAYMENTS_TLS_HANDSHAKE_TIMEOUT": "20ms",
		"PAYMENTS_READ_TIMEOUT": "50ms", "PAYMENTS_RETRIES": "0",
		"PAYMENTS_ROUTES": "create-charge", "PAYMENTS_ROUTE_CREATE_CHARGE_MATCH": "POST /v1/charges",
		"PAYMENTS_ROUTE_CREATE_CHARGE_READ_TIMEOUT": "5s", "PAYMENTS_ROUTE_CREATE_CHARGE_CALL_TIMEOUT": "8s",
	}))
	c, _ := r.Client("payments")
	if status, body, err := routeCall(t, c, http.MethodPost, "/charges", "x"); err != nil || status != 200 || body != "late" {
		t.Fatalf("POST /v1/charges: %d %q %v, want 200 late (the route's 5s)", status, body, err)
	}
	_, _, err := routeCall(t, c, http.MethodGet, "/charges/1", "")
	var e *Error
	if !errors.As(err, &e) || e.Op.String() != "read timeout" {
		t.Fatalf("GET /v1/charges/1: %v, want a read timeout from the system's 50ms", err)
	}
}

// A POST on a route declared IDEMPOTENT is retried, its body replayed; a
// POST elsewhere in the system is sent once.
func TestIdempotentRouteRetriesAPostWithItsBody(t *testing.T) {
	t.Parallel()
	var bodies [2]atomic.Int64
	var sawBody atomic.Value
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		i := 0
		if strings.HasPrefix(r.URL.Path, "/v1/refunds") {
			i = 1
		}
		if bodies[i].Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		sawBody.Store(string(b))
		_, _ = io.WriteString(w, "ok")
	}))
	r := loadRegistry(t, routeEnv(up.URL, map[string]string{
		"PAYMENTS_RETRIES": "2",
		"PAYMENTS_ROUTES":  "create-charge", "PAYMENTS_ROUTE_CREATE_CHARGE_MATCH": "POST /v1/charges",
		"PAYMENTS_ROUTE_CREATE_CHARGE_IDEMPOTENT": "true",
	}))
	c, _ := r.Client("payments")
	if status, body, err := routeCall(t, c, http.MethodPost, "/charges", `{"amount":42}`); err != nil || status != 200 || body != "ok" {
		t.Fatalf("POST /v1/charges: %d %q %v, want 200 ok after one retry", status, body, err)
	}
	if got := sawBody.Load(); got != `{"amount":42}` || bodies[0].Load() != 2 {
		t.Errorf("the retry carried %q (%d attempts), want the body replayed in a second attempt", got, bodies[0].Load())
	}
	if status, _, err := routeCall(t, c, http.MethodPost, "/refunds", `{"amount":1}`); err != nil || status != 503 || bodies[1].Load() != 1 {
		t.Errorf("POST /v1/refunds: %d %v after %d attempts, want the 503 of its one attempt", status, err, bodies[1].Load())
	}
}

// A route with a breaker of its own opens on its own failures while the
// system's other routes keep being served.
func TestRouteOwnBreakerOpensAlone(t *testing.T) {
	t.Parallel()
	var exports atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/exports") {
			exports.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	r := loadRegistry(t, routeEnv(up.URL, map[string]string{
		"PAYMENTS_RETRIES": "0", "PAYMENTS_BREAKER_MIN_REQUESTS": "3", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "1m",
		"PAYMENTS_ROUTES": "export", "PAYMENTS_ROUTE_EXPORT_MATCH": "GET /v1/exports/{id}",
		"PAYMENTS_ROUTE_EXPORT_BREAKER": "own",
	}))
	c, _ := r.Client("payments")
	for range 3 {
		if status, _, err := routeCall(t, c, http.MethodGet, "/exports/1", ""); err != nil || status != 500 {
			t.Fatalf("GET /v1/exports/1: %d %v, want the 500", status, err)
		}
	}
	_, _, err := routeCall(t, c, http.MethodGet, "/exports/2", "")
	if !errors.Is(err, ErrCircuitOpen) || exports.Load() != 3 {
		t.Fatalf("fourth export: %v after %d sent, want ErrCircuitOpen with none sent", err, exports.Load())
	}
	for range 5 {
		if status, body, err := routeCall(t, c, http.MethodGet, "/charges/1", ""); err != nil || status != 200 || body != "ok" {
			t.Fatalf("GET /v1/charges/1 beside the open export breaker: %d %q %v", status, body, err)
		}
	}
	st := c.Status()
	if st.Breaker != "closed" || st.Routes[0].Breaker != "open" || !st.Routes[0].OwnBreaker {
		t.Errorf("system breaker %s, export's %s (own %v); want closed and open", st.Breaker, st.Routes[0].Breaker, st.Routes[0].OwnBreaker)
	}
}

// A route's own rate limit refuses its requests past the limit, while the
// system's other routes are not limited.
func TestRouteRateLimitRefusesOnlyItsRequests(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	r := loadRegistry(t, routeEnv(up.URL, map[string]string{
		"PAYMENTS_ROUTES": "search", "PAYMENTS_ROUTE_SEARCH_MATCH": "GET /v1/search",
		"PAYMENTS_ROUTE_SEARCH_RATE_LIMIT": "2/m",
	}))
	c, _ := r.Client("payments")
	served, refused := 0, 0
	for range 5 {
		_, _, err := routeCall(t, c, http.MethodGet, "/search?q=x", "")
		switch {
		case err == nil:
			served++
		case errors.Is(err, ErrRateLimited):
			refused++
		default:
			t.Fatalf("search: %v", err)
		}
	}
	if served != 1 || refused != 4 {
		t.Errorf("search: %d served, %d refused; want 1 and 4 (2/m: a burst of 1, the next token in 30s)", served, refused)
	}
	for range 20 {
		if status, _, err := routeCall(t, c, http.MethodGet, "/charges/1", ""); err != nil || status != 200 {
			t.Fatalf("GET /v1/charges/1 beside the spent search limit: %d %v", status, err)
		}
	}
}

// Requests an SDK builds through HTTPClient() are matched the same way:
// the pattern is the API's own path.
func TestHTTPClientRequestsAreMatchedToRoutes(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	r := loadRegistry(t, routeEnv(up.URL, map[string]string{
		"PAYMENTS_RETRIES": "0",
		"PAYMENTS_ROUTES":  "get-charge", "PAYMENTS_ROUTE_GET_CHARGE_MATCH": "GET /v1/charges/{id}",
		"PAYMENTS_ROUTE_GET_CHARGE_RETRIES": "2",
	}))
	c, _ := r.Client("payments")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/v1/charges/ch_1", nil)
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || n.Load() != 2 {
		t.Errorf("status %d after %d attempts, want 200 after the route's retry", resp.StatusCode, n.Load())
	}
}

// Matching a request that matches no route allocates nothing.
func TestRouteMatchAllocatesNothingOnAMiss(t *testing.T) {
	r := loadRegistry(t, routeEnv("http://127.0.0.1:1", tenRoutes()))
	c, _ := r.Client("payments")
	req, _ := http.NewRequest(http.MethodGet, "/v1/other/path", nil)
	if p := c.policy(req); p != c.pol.Load().sys {
		t.Fatalf("matched %q, want none", p.name)
	}
	if n := testing.AllocsPerRun(100, func() { _ = c.policy(req) }); n != 0 {
		t.Errorf("a miss costs %v allocations, want 0", n)
	}
}

// tenRoutes declares ten routes of a payments-like API.
func tenRoutes() map[string]string {
	env := map[string]string{"PAYMENTS_ROUTES": "c1,c2,c3,c4,c5,c6,c7,c8,c9,c10"}
	patterns := []string{"POST /v1/charges", "GET /v1/charges/{id}", "POST /v1/charges/{id}/capture", "GET /v1/customers/{id}",
		"POST /v1/customers", "GET /v1/search", "GET /v1/exports/{id}", "/v1/files/{path...}", "POST /v1/refunds", "GET /v1/balance"}
	for i, p := range patterns {
		env["PAYMENTS_ROUTE_C"+strconv.Itoa(i+1)+"_MATCH"] = p
	}
	return env
}

// The route matcher agrees with net/http's ServeMux, the rule routes are
// declared in: for every request, the pattern ServeMux picks among the
// routes' is the one the matcher picks, or none for both.
func TestRouteMatchAgreesWithServeMux(t *testing.T) {
	t.Parallel()
	patterns := []string{"POST /v1/charges", "GET /v1/charges/{id}", "/v1/charges/{id}/capture", "GET /v1/customers/{id}",
		"/v1/customers/", "GET /v1/search", "/v1/exports/{id}/{$}", "/v1/files/{path...}", "DELETE /v1/charges/{id}",
		"/v1/charges/", "GET /v2/{version}/items", "/a%20b/c"}
	mux := http.NewServeMux()
	rs := &routeSet{}
	for i, p := range patterns {
		mux.Handle(p, routeOracle(p))
		rs.routes = append(rs.routes, &route{name: strconv.Itoa(i), match: p})
		rs.pats = append(rs.pats, parsePattern(p))
	}
	paths := []string{"/v1/charges", "/v1/charges/", "/v1/charges/ch_1", "/v1/charges/ch_1/capture", "/v1/charges/ch_1/refunds",
		"/v1/customers", "/v1/customers/", "/v1/customers/cu_1", "/v1/customers/cu_1/x", "/v1/search", "/v1/search/",
		"/v1/exports/7/", "/v1/exports/7", "/v1/exports/7/x", "/v1/files/", "/v1/files/a/b/c", "/v1/files",
		"/v2/x/items", "/v2/x/items/", "/", "/other", "/a b/c"}
	for _, method := range []string{"GET", "HEAD", "POST", "DELETE", "PATCH"} {
		for _, path := range paths {
			req := &http.Request{Method: method, URL: &url.URL{Path: path}}
			// ServeMux answers some paths with a redirect to the one a
			// pattern matches ("/v1/files" to "/v1/files/"): a client
			// sends the path it has, which no pattern matches.
			h, _ := mux.Handler(req)
			want, _ := h.(routeOracle)
			got := routeOracle("")
			if r := rs.match(req); r != nil {
				got = routeOracle(r.match)
			}
			if got != want {
				t.Errorf("%s %s: matched %q, ServeMux %q", method, path, got, want)
			}
		}
	}
}

// routeOracle is the handler of a pattern on the ServeMux that tells
// which pattern matched.
type routeOracle string

func (routeOracle) ServeHTTP(http.ResponseWriter, *http.Request) {}

// BenchmarkRouteMatch is the cost of matching a request among ten
// routes: a hit with a wildcard, and a miss.
func BenchmarkRouteMatch(b *testing.B) {
	r, err := New(mustLoad(b, routeEnv("http://127.0.0.1:1", tenRoutes())))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	c, _ := r.Client("payments")
	for _, path := range []string{"/charges/ch_1", "/other/path"} {
		req, _ := http.NewRequest(http.MethodGet, path, nil)
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = c.policy(req)
			}
		})
	}
}

func mustLoad(tb testing.TB, env map[string]string) []config.Loaded {
	tb.Helper()
	l, err := config.LoadEnv(env)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}
