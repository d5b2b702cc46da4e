package adapters_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClient returns the client of system "upstream" at baseURL, loaded
// from the environment as a service would, with defaults d over the
// baseline. The registry is closed in t.Cleanup.
func newClient(t *testing.T, baseURL string, d config.Client) *registry.Client {
	t.Helper()
	t.Setenv("UPSTREAM_BASE_URL", baseURL)
	reg, err := registry.FromEnv(config.System{Name: "upstream", Defaults: d})
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg.MustClient("upstream")
}

// noRetries keeps a test to one attempt per call.
var noRetries = func() config.Client {
	d := config.Baseline()
	d.Retries = 0
	return d
}()

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type stock struct {
	ISBN      string `json:"isbn"`
	Available int    `json:"available"`
}

func TestGetJSONOK(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Body: `{"isbn":"9780441172719","available":12}`,
		Header: http.Header{"Content-Type": {"application/json"}}})
	c := newClient(t, srv.URL+"/api/", noRetries)

	var got stock
	if err := adapters.GetJSON(ctxT(t), c, []string{"stock", "9780441172719"}, &got); err != nil {
		t.Fatalf("GetJSON: %v", err)
	}
	if want := (stock{"9780441172719", 12}); got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	rec := srv.Received()
	if len(rec) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(rec))
	}
	r := rec[0]
	if r.Method != http.MethodGet || r.Path != "/api/stock/9780441172719" {
		t.Errorf("request %s %s, want GET /api/stock/9780441172719", r.Method, r.Path)
	}
	if got := r.Header.Get("Accept"); got != "application/json" {
		t.Errorf("Accept = %q, want application/json", got)
	}
	if got := r.Header.Get("Content-Type"); got != "" {
		t.Errorf("Content-Type = %q on a GET without body, want none", got)
	}
}

func TestNoContentAndNilOut(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusNoContent},
		outboundtest.Reply{Body: `{"ignored":true}`})
	c := newClient(t, srv.URL, noRetries)
	var out stock
	if err := adapters.GetJSON(ctxT(t), c, []string{"a"}, &out); err != nil {
		t.Errorf("204: %v", err)
	}
	if err := adapters.GetJSON(ctxT(t), c, []string{"a"}, nil); err != nil {
		t.Errorf("nil out: %v", err)
	}
}

func TestNotFound(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusNotFound, Body: "no such book"})
	c := newClient(t, srv.URL, config.Client{}) // baseline retries: a 404 is not retried
	var out stock
	err := adapters.GetJSON(ctxT(t), c, []string{"stock", "0000000000"}, &out)
	if !errors.Is(err, adapters.ErrNotFound) {
		t.Fatalf("err = %v, want one matching ErrNotFound", err)
	}
	var se *adapters.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || string(se.Body) != "no such book" {
		t.Fatalf("err = %#v, want a StatusError 404 with the body", err)
	}
	if adapters.Degradable(err) {
		t.Error("Degradable(404) = true, want false")
	}
	if srv.Hits() != 1 {
		t.Errorf("upstream saw %d requests, want 1 (404 is not retried)", srv.Hits())
	}
}

func TestServerErrorKeepsBodyStart(t *testing.T) {
	long := "database is down; " + strings.Repeat("x", 1000)
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: long})
	c := newClient(t, srv.URL, noRetries)
	err := adapters.GetJSON(ctxT(t), c, []string{"stock", "1"}, new(stock))
	var se *adapters.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a StatusError", err)
	}
	if se.StatusCode != 503 || string(se.Body) != long[:256] {
		t.Errorf("status %d, body %q (%d bytes); want 503 and the first 256 bytes", se.StatusCode, se.Body, len(se.Body))
	}
	if errors.Is(err, adapters.ErrNotFound) {
		t.Error("a 503 matches ErrNotFound")
	}
	if !adapters.Degradable(err) {
		t.Error("Degradable(503) = false, want true")
	}
	for _, want := range []string{"upstream", "GET", "/stock/1", "503", "database is down"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
}

func TestErrorBodiesAreDrained(t *testing.T) {
	srv := testutil.Script(t, testutil.LargeBody(http.StatusNotFound, testutil.LargeBodySize))
	c := newClient(t, srv.URL, noRetries)
	for range 5 {
		if err := adapters.GetJSON(ctxT(t), c, []string{"x"}, nil); !errors.Is(err, adapters.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	}
	if n := srv.Conns(); n != 1 {
		t.Errorf("5 sequential calls opened %d connections, want 1 (bodies drained)", n)
	}
}

func TestBodyLimit(t *testing.T) {
	big := `"` + strings.Repeat("a", int(adapters.DefaultMaxBody)) + `"` // 1 MiB + 2 bytes of JSON
	fits := `"` + strings.Repeat("a", int(adapters.DefaultMaxBody)-2) + `"`
	tests := []struct {
		name    string
		body    string
		opts    []adapters.Option
		wantErr bool
	}{
		{"default limit, exactly 1 MiB", fits, nil, false},
		{"default limit, over 1 MiB", big, nil, true},
		{"WithMaxBody(16), 16 bytes", `"0123456789abcd"`, []adapters.Option{adapters.WithMaxBody(16)}, false},
		{"WithMaxBody(16), 17 bytes", `"0123456789abcde"`, []adapters.Option{adapters.WithMaxBody(16)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testutil.Script(t, outboundtest.Reply{Body: tt.body})
			c := newClient(t, srv.URL, noRetries)
			var s string
			err := adapters.DoJSON(ctxT(t), c, adapters.Request{Path: []string{"big"}, Out: &s}, tt.opts...)
			if tt.wantErr {
				if !errors.Is(err, adapters.ErrBodyTooLarge) {
					t.Fatalf("err = %v, want ErrBodyTooLarge", err)
				}
				if !strings.Contains(err.Error(), "upstream GET /big") {
					t.Errorf("message %q does not name the call", err)
				}
				if adapters.Degradable(err) {
					t.Error("Degradable(too large) = true, want false")
				}
				return
			}
			if err != nil || len(s) != len(tt.body)-2 {
				t.Fatalf("err = %v, decoded %d bytes; want the whole value", err, len(s))
			}
		})
	}
}

func TestBadJSON(t *testing.T) {
	for _, body := range []string{`{"isbn":`, `{"available":"twelve"}`, `<html>oops</html>`} {
		t.Run(body, func(t *testing.T) {
			srv := testutil.Script(t, outboundtest.Reply{Body: body})
			c := newClient(t, srv.URL, noRetries)
			err := adapters.GetJSON(ctxT(t), c, []string{"stock", "1"}, new(stock))
			var syn *json.SyntaxError
			var typ *json.UnmarshalTypeError
			if !errors.As(err, &syn) && !errors.As(err, &typ) {
				t.Fatalf("err = %v, want the JSON decoder's error", err)
			}
			if !strings.Contains(err.Error(), "decode response") {
				t.Errorf("message %q does not say the decode failed", err)
			}
			if adapters.Degradable(err) {
				t.Error("Degradable(bad JSON) = true, want false")
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	at := time.Now().Add(30 * time.Second)
	tests := []struct {
		name     string
		header   http.Header
		min, max time.Duration
	}{
		{"seconds", outboundtest.RetryAfterSeconds(7), 7 * time.Second, 7 * time.Second},
		{"HTTP-date", outboundtest.RetryAfterDate(at), 27 * time.Second, 30 * time.Second},
		{"date in the past", outboundtest.RetryAfterDate(time.Now().Add(-time.Hour)), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusTooManyRequests, Header: tt.header, Body: "slow down"})
			c := newClient(t, srv.URL, noRetries)
			err := adapters.GetJSON(ctxT(t), c, []string{"x"}, nil)
			var se *adapters.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a StatusError", err)
			}
			if !se.HasRetryAfter || se.RetryAfter < tt.min || se.RetryAfter > tt.max {
				t.Errorf("RetryAfter = %v (has %v), want %v..%v", se.RetryAfter, se.HasRetryAfter, tt.min, tt.max)
			}
			if !adapters.Degradable(err) {
				t.Error("Degradable(429) = false, want true")
			}
		})
	}
	t.Run("absent or malformed", func(t *testing.T) {
		srv := testutil.Script(t, outboundtest.Reply{Status: 500, Header: http.Header{"Retry-After": {"soon"}}})
		c := newClient(t, srv.URL, noRetries)
		err := adapters.GetJSON(ctxT(t), c, []string{"x"}, nil)
		var se *adapters.StatusError
		if !errors.As(err, &se) || se.HasRetryAfter {
			t.Errorf("err = %#v, want a StatusError without Retry-After", err)
		}
	})
}

func TestPathEscaping(t *testing.T) {
	rawPaths := make(chan string, 10)
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rawPaths <- r.URL.EscapedPath() + "?" + r.URL.RawQuery
		_, _ = io.WriteString(w, `{}`)
	}))
	c := newClient(t, srv.URL+"/api/v1?tenant=a", noRetries)

	tests := []struct {
		parts []string
		want  string
	}{
		{[]string{"stock", "978-0441172719"}, "/api/v1/stock/978-0441172719?tenant=a"},
		{[]string{"stock", "978/0441 172719"}, "/api/v1/stock/978%2F0441%20172719?tenant=a"},
		{[]string{"stock", "a?b#c"}, "/api/v1/stock/a%3Fb%23c?tenant=a"},
		{[]string{"stock", "ü"}, "/api/v1/stock/%C3%BC?tenant=a"},
	}
	for _, tt := range tests {
		if err := adapters.GetJSON(ctxT(t), c, tt.parts, nil); err != nil {
			t.Fatalf("GetJSON(%q): %v", tt.parts, err)
		}
		if got := <-rawPaths; got != tt.want {
			t.Errorf("GetJSON(%q) sent %s, want %s", tt.parts, got, tt.want)
		}
	}

	q := map[string][]string{"warehouse": {"IST 1"}}
	if err := adapters.DoJSON(ctxT(t), c, adapters.Request{Path: []string{"stock"}}, adapters.WithQuery(q)); err != nil {
		t.Fatal(err)
	}
	if got, want := <-rawPaths, "/api/v1/stock?tenant=a&warehouse=IST+1"; got != want {
		t.Errorf("WithQuery sent %s, want %s", got, want)
	}

	for _, bad := range [][]string{{"stock", ""}, {"stock", "."}, {"..", "etc"}} {
		err := adapters.GetJSON(ctxT(t), c, bad, nil)
		if !errors.Is(err, adapters.ErrBadPath) {
			t.Errorf("GetJSON(%q) = %v, want ErrBadPath", bad, err)
		}
	}
	if n := srv.Requests(); n != 5 {
		t.Errorf("upstream saw %d requests, want 5 (bad paths send nothing)", n)
	}
}

func TestPostReplaysBodyWithIdempotencyKey(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable},
		outboundtest.Reply{Status: http.StatusCreated, Body: `{"id":"pay_1"}`})
	c := newClient(t, srv.URL, config.Client{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})

	in := map[string]any{"order_id": "42", "amount_cents": 1999}
	var out struct{ ID string }
	err := adapters.DoJSON(ctxT(t), c, adapters.Request{Method: http.MethodPost, Path: []string{"payments"}, In: in, Out: &out},
		adapters.WithIdempotencyKey("order-42"), adapters.WithHeader("X-Request-Id", "r1"))
	if err != nil || out.ID != "pay_1" {
		t.Fatalf("DoJSON = %v, id %q; want pay_1", err, out.ID)
	}
	rec := srv.Received()
	if len(rec) != 2 {
		t.Fatalf("upstream saw %d requests, want 2 (503 then 201)", len(rec))
	}
	for i, r := range rec {
		if r.Header.Get("Idempotency-Key") != "order-42" || r.Header.Get("X-Request-Id") != "r1" {
			t.Errorf("attempt %d headers %v, want Idempotency-Key order-42 and X-Request-Id r1", i+1, r.Header)
		}
		if r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("attempt %d Content-Type %q", i+1, r.Header.Get("Content-Type"))
		}
	}
	if string(rec[0].Body) != `{"amount_cents":1999,"order_id":"42"}` || string(rec[1].Body) != string(rec[0].Body) {
		t.Errorf("bodies %q and %q, want the same JSON twice", rec[0].Body, rec[1].Body)
	}
}

func TestPostWithoutKeyIsNotRetried(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	c := newClient(t, srv.URL, config.Client{})
	err := adapters.DoJSON(ctxT(t), c, adapters.Request{Method: http.MethodPost, Path: []string{"orders"}, In: map[string]int{"n": 1}})
	var se *adapters.StatusError
	if !errors.As(err, &se) || se.StatusCode != 503 {
		t.Fatalf("err = %v, want StatusError 503", err)
	}
	if srv.Hits() != 1 {
		t.Errorf("upstream saw %d requests, want 1: a POST without Idempotency-Key is never replayed", srv.Hits())
	}
}

func TestFastFailuresAreDegradable(t *testing.T) {
	t.Run("budget spent", func(t *testing.T) {
		srv := testutil.Script(t)
		c := newClient(t, srv.URL, noRetries)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond) // less than the 100ms reserve
		defer cancel()
		err := adapters.GetJSON(ctx, c, []string{"x"}, nil)
		if !errors.Is(err, capbudget.ErrExhausted) || !adapters.Degradable(err) {
			t.Errorf("err = %v (degradable %v), want ErrExhausted, degradable", err, adapters.Degradable(err))
		}
		if srv.Hits() != 0 {
			t.Errorf("upstream saw %d requests, want 0", srv.Hits())
		}
	})
	t.Run("caller cancelled", func(t *testing.T) {
		srv := testutil.Script(t)
		c := newClient(t, srv.URL, noRetries)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := adapters.GetJSON(ctx, c, []string{"x"}, nil)
		if err == nil || adapters.Degradable(err) {
			t.Errorf("err = %v (degradable %v), want an error, not degradable", err, adapters.Degradable(err))
		}
	})
	t.Run("read timeout", func(t *testing.T) {
		srv := outboundtest.NewUpstream(t, outboundtest.NewHang(nil))
		d := noRetries
		d.ConnectTimeout, d.TLSHandshakeTimeout, d.ReadTimeout, d.CallTimeout = 100*time.Millisecond, 100*time.Millisecond, 200*time.Millisecond, 2*time.Second
		c := newClient(t, srv.URL, d)
		err := adapters.GetJSON(ctxT(t), c, []string{"x"}, nil)
		var re *registry.Error
		if !errors.As(err, &re) || !re.Timeout() || !adapters.Degradable(err) {
			t.Errorf("err = %v, want a degradable registry timeout", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		c := newClient(t, "http://"+testutil.RefusedAddr(t), noRetries)
		err := adapters.GetJSON(ctxT(t), c, []string{"x"}, nil)
		if err == nil || !adapters.Degradable(err) {
			t.Errorf("err = %v, want a degradable connect error", err)
		}
	})
}

func TestDegradable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("inventory adapter: %w", err) }
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"breaker open", &registry.Error{System: "s", Op: observe.OpBreaker, Err: registry.ErrCircuitOpen}, true},
		{"bulkhead full", &registry.Error{System: "s", Op: observe.OpBulkhead, Err: bulkhead.ErrFull}, true},
		{"budget spent", &registry.Error{System: "s", Op: observe.OpBudget, Err: capbudget.ErrExhausted}, true},
		{"read timeout", &registry.Error{System: "s", Op: observe.OpReadTimeout}, true},
		{"call timeout", &registry.Error{System: "s", Op: observe.OpCallTimeout}, true},
		{"budget timeout", &registry.Error{System: "s", Op: observe.OpBudgetTimeout}, true},
		{"connect refused", &registry.Error{System: "s", Op: observe.OpConnect}, true},
		{"gave up on a status", &registry.Error{System: "s", Op: observe.OpStatus, StatusCode: 429}, true},
		{"caller cancelled", &registry.Error{System: "s", Op: observe.OpCanceled, Err: context.Canceled}, false},
		{"registry closed", &registry.Error{System: "s", Op: observe.OpClosed, Err: registry.ErrClosed}, false},
		{"wrapped breaker open", wrap(&registry.Error{System: "s", Op: observe.OpBreaker, Err: registry.ErrCircuitOpen}), true},
		{"bare ErrFull", wrap(bulkhead.ErrFull), true},
		{"bare ErrExhausted", capbudget.ErrExhausted, true},
		{"bare ErrCircuitOpen", registry.ErrCircuitOpen, true},
		{"deadline exceeded", wrap(context.DeadlineExceeded), true},
		{"context canceled", wrap(context.Canceled), false},
		{"500", &adapters.StatusError{StatusCode: 500}, true},
		{"502 wrapped", wrap(&adapters.StatusError{StatusCode: 502}), true},
		{"408", &adapters.StatusError{StatusCode: 408}, true},
		{"429", &adapters.StatusError{StatusCode: 429}, true},
		{"400", &adapters.StatusError{StatusCode: 400}, false},
		{"404", &adapters.StatusError{StatusCode: 404}, false},
		{"409", &adapters.StatusError{StatusCode: 409}, false},
		{"too large", wrap(adapters.ErrBodyTooLarge), false},
		{"other", errors.New("boom"), false},
	}
	for _, tt := range tests {
		if got := adapters.Degradable(tt.err); got != tt.want {
			t.Errorf("Degradable(%s: %v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// A 429 whose Retry-After would pass the caller's deadline reaches the
// adapter's caller as a StatusError with the hint, wrapping the
// registry's error.
func TestRetryAfterPastDeadlineReachesTheCallerWithTheHint(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusTooManyRequests, Header: outboundtest.RetryAfterSeconds(1)})
	c := newClient(t, srv.URL, config.Client{})
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	err := adapters.GetJSON(ctx, c, []string{"x"}, nil)
	var se *adapters.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("got %T %v, want a *StatusError", err, err)
	}
	if se.StatusCode != http.StatusTooManyRequests || !se.HasRetryAfter || se.RetryAfter != time.Second {
		t.Errorf("StatusError{%d, %v, %v}, want {429, true, 1s}", se.StatusCode, se.HasRetryAfter, se.RetryAfter)
	}
	var re *registry.Error
	if !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) || !adapters.Degradable(err) {
		t.Errorf("%v: want it to wrap the registry's error, match DeadlineExceeded and be degradable", err)
	}
	t.Log(err)
}
