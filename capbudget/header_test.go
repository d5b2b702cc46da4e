package capbudget_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/capbudget"
)

func TestParseHeader(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"1", time.Millisecond},
		{"250", 250 * time.Millisecond},
		{"007", 7 * time.Millisecond},
		{"3600000", time.Hour},
		{"00000000003600000", time.Hour}, // 17 digits: leading zeros are fine
	}
	for _, tc := range good {
		got, err := capbudget.ParseHeader(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseHeader(%q) = %v, %v; want %v, nil", tc.in, got, err, tc.want)
		}
	}

	bad := []string{
		"", "abc", "-5", "+5", "-0", "1.5", "10s", "10ms", " 5", "5 ", "5\t",
		"0x10", "1_000", "1e3", "١٢", "3600001", "9999999999",
		"99999999999999999999999999", "000000000000003600000",
		strings.Repeat("9", 1000),
	}
	for _, in := range bad {
		got, err := capbudget.ParseHeader(in)
		if err == nil {
			t.Errorf("ParseHeader(%q) = %v, nil; want an error", in, got)
			continue
		}
		if got != 0 {
			t.Errorf("ParseHeader(%q) returned %v with an error, want 0", in, got)
		}
		if !strings.Contains(err.Error(), capbudget.Header) {
			t.Errorf("ParseHeader(%q) error %q does not name %s", in, err, capbudget.Header)
		}
		if len(err.Error()) > 200 {
			t.Errorf("ParseHeader error is %d bytes long, want the value truncated", len(err.Error()))
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, seed := range []string{"0", "250", "3600000", "3600001", "", "-5", "1.5", "10s", "007", "+1", "99999999999999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := capbudget.ParseHeader(v)
		if err != nil {
			if d != 0 || !strings.Contains(err.Error(), capbudget.Header) {
				t.Fatalf("ParseHeader(%q) = %v, %v", v, d, err)
			}
			return
		}
		if strings.TrimLeft(v, "0123456789") != "" {
			t.Fatalf("ParseHeader accepted non-digits %q", v)
		}
		if d < 0 || d > capbudget.MaxBudget || d%time.Millisecond != 0 {
			t.Fatalf("ParseHeader(%q) = %v: out of range or not whole ms", v, d)
		}
		if n, _ := strconv.ParseInt(v, 10, 64); time.Duration(n)*time.Millisecond != d {
			t.Fatalf("ParseHeader(%q) = %v, want %dms", v, d, n)
		}
		again, err := capbudget.ParseHeader(strconv.FormatInt(d.Milliseconds(), 10))
		if err != nil || again != d {
			t.Fatalf("round trip of %v: %v, %v", d, again, err)
		}
	})
}

func TestSetHeader(t *testing.T) {
	tests := []struct {
		name string
		ctx  callerCtx
		want []string // nil: header absent
	}{
		{"1500ms left", withTimeout(1500 * time.Millisecond), []string{"1500"}},
		{"rounds down", withTimeout(1500*time.Millisecond + 999*time.Microsecond), []string{"1500"}},
		{"under 1ms left", withTimeout(time.Microsecond), []string{"0"}},
		{"deadline passed", passedDeadline(time.Second), []string{"0"}},
		{"more than MaxBudget", withTimeout(3 * time.Hour), []string{"3600000"}},
		{"no deadline deletes", background, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := http.Header{capbudget.Header: {"stale", "values"}}
				capbudget.SetHeader(tc.ctx(t), h)
				got, present := h[capbudget.Header]
				if (tc.want == nil) == present || strings.Join(got, ",") != strings.Join(tc.want, ",") {
					t.Fatalf("header = %q (present %v), want %q", got, present, tc.want)
				}
			})
		})
	}
}

func TestSetHeaderRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, left := range []time.Duration{0, time.Millisecond, 250 * time.Millisecond, 59 * time.Minute, time.Hour} {
			ctx, cancel := context.WithTimeout(context.Background(), left)
			h := http.Header{}
			capbudget.SetHeader(ctx, h)
			cancel()
			got, err := capbudget.ParseHeader(h.Get(capbudget.Header))
			if err != nil || got != left {
				t.Errorf("%v left: ParseHeader(%q) = %v, %v", left, h.Get(capbudget.Header), got, err)
			}
		}
	})
}

// serve runs h on a request with the given X-Time-Budget values (none when
// empty) and request context; it reports the handler's deadline and whether
// the handler ran.
func serve(h func(http.Handler) http.Handler, ctx context.Context, values ...string) (rec *httptest.ResponseRecorder, deadline time.Time, hasDeadline, called bool) {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/", nil)
	for _, v := range values {
		req.Header.Add(capbudget.Header, v)
	}
	rec = httptest.NewRecorder()
	h(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		deadline, hasDeadline = r.Context().Deadline()
	})).ServeHTTP(rec, req)
	return rec, deadline, hasDeadline, called
}

func TestMiddlewareBoundsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "http://127.0.0.1/", nil)
		req.Header.Set(capbudget.Header, "250")
		called := false
		capbudget.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			called = true
			deadline, ok := r.Context().Deadline()
			if !ok || !deadline.Equal(start.Add(250*time.Millisecond)) {
				t.Errorf("handler deadline = %v (ok=%v), want 250ms", deadline.Sub(start), ok)
			}
			<-r.Context().Done()
			if elapsed := time.Since(start); elapsed != 250*time.Millisecond {
				t.Errorf("request context ended after %v, want 250ms", elapsed)
			}
			if cause := context.Cause(r.Context()); cause != capbudget.ErrExhausted {
				t.Errorf("Cause = %v, want ErrExhausted", cause)
			}
		})).ServeHTTP(httptest.NewRecorder(), req)
		if !called {
			t.Fatal("next was not called")
		}
	})
}

func TestMiddlewareZeroBudget(t *testing.T) {
	rec, _, _, called := serve(capbudget.Middleware, context.Background(), "0")
	if called {
		t.Error("next was called for a zero budget")
	}
	if rec.Code != http.StatusGatewayTimeout {
		t.Errorf("status = %d, want 504", rec.Code)
	}
}

func TestMiddlewareIgnoresBadOrMissingHeader(t *testing.T) {
	for _, values := range [][]string{nil, {""}, {"abc"}, {"-5"}, {"1.5"}, {"10s"}, {"3600001"}, {"x", "250"}} {
		rec, deadline, ok, called := serve(capbudget.Middleware, context.Background(), values...)
		if !called || rec.Code != http.StatusOK {
			t.Errorf("%q: next called %v, status %d; want called, 200", values, called, rec.Code)
		}
		if ok {
			t.Errorf("%q: handler has a deadline %v, want none", values, time.Until(deadline))
		}
	}
}

func TestMiddlewareKeepsEarlierDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		for _, tc := range []struct {
			existing, want time.Duration
		}{
			{100 * time.Millisecond, 100 * time.Millisecond}, // sooner existing deadline wins
			{10 * time.Second, 250 * time.Millisecond},       // the budget is sooner
		} {
			ctx, cancel := context.WithTimeout(context.Background(), tc.existing)
			_, deadline, ok, called := serve(capbudget.Middleware, ctx, "250")
			cancel()
			if !called || !ok || !deadline.Equal(start.Add(tc.want)) {
				t.Errorf("existing %v: handler deadline %v (ok=%v, called=%v), want %v",
					tc.existing, deadline.Sub(start), ok, called, tc.want)
			}
		}
	})
}

func TestMiddlewareWithClamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		for _, tc := range []struct {
			max, want time.Duration
		}{
			{time.Second, time.Second},
			{0, time.Hour}, // no extra limit
		} {
			mw := func(next http.Handler) http.Handler { return capbudget.MiddlewareWith(next, tc.max) }
			_, deadline, ok, _ := serve(mw, context.Background(), "3600000")
			if !ok || !deadline.Equal(start.Add(tc.want)) {
				t.Errorf("max %v: handler deadline %v (ok=%v), want %v", tc.max, deadline.Sub(start), ok, tc.want)
			}
		}
	})
}

// TestMiddlewareOverLoopback propagates a budget end to end through a real
// server: SetHeader on the client, Middleware on the server.
func TestMiddlewareOverLoopback(t *testing.T) {
	type seen struct {
		left time.Duration
		ok   bool
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(capbudget.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		left, ok := capbudget.Remaining(r.Context(), 0)
		got <- seen{left, ok}
	})))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ctx, cancelCall := capbudget.Cap(ctx, 5*time.Second)
	defer cancelCall()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	capbudget.SetHeader(ctx, req.Header)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := <-got
	if !s.ok || s.left <= 0 || s.left > 2*time.Second-capbudget.DefaultReserve {
		t.Fatalf("server saw %v left (deadline %v), want within (0, 1.9s]", s.left, s.ok)
	}

	// A spent budget is answered with 504 without reaching the handler.
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set(capbudget.Header, "0")
	resp, err = srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || len(got) != 0 {
		t.Fatalf("zero budget: status %d, handler ran %v; want 504, not run", resp.StatusCode, len(got) != 0)
	}
}
