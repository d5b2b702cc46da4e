package statuspage_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// newRegistry builds inv (whose breaker opens after 5 failed calls and
// stays open) and pay against one loopback upstream that answers 503 on
// /down and 200 elsewhere, observed by a Recorder. INV_BASE_URL carries
// userinfo and a token, which must never reach the page.
func newRegistry(t *testing.T) (*registry.Registry, *statuspage.Recorder) {
	t.Helper()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/down") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Setenv("OUTBOUND_SYSTEMS", "inv,pay")
	t.Setenv("INV_BASE_URL", "http://alice:hunter22@"+up.Addr()+"/v1?token=sekrit99")
	t.Setenv("INV_RETRIES", "0")
	t.Setenv("INV_BREAKER_MIN_REQUESTS", "5")
	t.Setenv("INV_BREAKER_OPEN_TIMEOUT", "1h")
	t.Setenv("PAY_BASE_URL", up.URL)
	rec := statuspage.NewRecorder()
	r, err := registry.FromEnvWith(nil, registry.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, rec
}

func call(t *testing.T, c *registry.Client, path string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	resp, err := c.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

func serve(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestRoutes(t *testing.T) {
	r, rec := newRegistry(t)
	h := statuspage.Handler(r, rec)
	for _, tc := range []struct {
		method, target string
		code           int
		ctype          string
	}{
		{"GET", "/", 200, "text/html"},
		{"HEAD", "/", 200, "text/html"},
		{"GET", "/status.json", 200, "application/json"},
		{"GET", "/debug/outbound/", 200, "text/html"},                   // mounted without StripPrefix
		{"GET", "/debug/outbound/status.json", 200, "application/json"}, // idem
		{"GET", "/favicon.ico", 404, ""},
		{"POST", "/status.json", 405, ""},
	} {
		res := serve(t, h, tc.method, tc.target)
		if res.Code != tc.code || !strings.HasPrefix(res.Header().Get("Content-Type"), tc.ctype) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.target, res.Code, res.Header().Get("Content-Type"), tc.code, tc.ctype)
		}
		if tc.method == "HEAD" && res.Body.Len() != 0 {
			t.Errorf("HEAD %s: body of %d bytes", tc.target, res.Body.Len())
		}
	}
}

// TestPageIsSelfContained checks that the page loads nothing from
// elsewhere and that its CSP admits exactly its inline style and script.
func TestPageIsSelfContained(t *testing.T) {
	r, _ := newRegistry(t)
	res := serve(t, statuspage.Handler(r, nil), "GET", "/")
	page := res.Body.String()
	for _, bad := range []string{"http://", "https://", "src=", "<link", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: it must not load anything", bad)
		}
	}
	if !strings.Contains(page, `"status.json"`) || strings.Contains(page, `fetch("/`) {
		t.Error("page must poll the relative URL status.json")
	}
	csp := res.Header().Get("Content-Security-Policy")
	for _, el := range []string{"style", "script"} {
		m := regexp.MustCompile(`(?s)<` + el + `>(.*?)</` + el + `>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no inline <%s>", el)
		}
		sum := sha256.Sum256([]byte(m[1]))
		want := el + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	for _, want := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
}

// TestStatusJSON checks the snapshot after traffic: counters, latency,
// the breaker's change time, the last error and the config, with the
// BASE_URL's secrets redacted everywhere.
func TestStatusJSON(t *testing.T) {
	r, rec := newRegistry(t)
	inv := r.MustClient("inv")
	for range 3 {
		call(t, inv, "/ok")
	}
	for i := 0; i < 20 && inv.Status().Breaker != observe.BreakerOpen; i++ {
		call(t, inv, "/down")
	}
	call(t, inv, "/ok") // refused by the open breaker

	res := serve(t, statuspage.Handler(r, rec), "GET", "/status.json")
	body := res.Body.String()
	for _, secret := range []string{"alice", "hunter22", "sekrit99"} {
		if strings.Contains(body, secret) {
			t.Errorf("status.json contains %q", secret)
		}
	}
	if res.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", res.Header().Get("Cache-Control"))
	}
	var snap statuspage.Snapshot
	if err := json.Unmarshal(res.Body.Bytes(), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.GeneratedAt.IsZero() || snap.PollIntervalMS != 1000 || len(snap.Systems) != 2 {
		t.Fatalf("snapshot %+v", snap)
	}
	s, p := snap.Systems[0], snap.Systems[1]
	if s.System != "inv" || p.System != "pay" {
		t.Fatalf("systems %s, %s: want declaration order inv, pay", s.System, p.System)
	}
	if s.Breaker != observe.BreakerOpen || s.BreakerChangedAt == nil || s.BreakerRefused != 1 {
		t.Errorf("inv breaker %s changed %v rejected %d: want open, a time, 1", s.Breaker, s.BreakerChangedAt, s.BreakerRefused)
	}
	if s.Calls != 3+s.GaveUp || s.OK != 3 || s.GaveUp < 3 {
		t.Errorf("inv counters calls=%d ok=%d gave_up=%d", s.Calls, s.OK, s.GaveUp)
	}
	if s.Latency == nil || s.Latency.Samples != int(s.Calls) || s.Latency.P50MS <= 0 || s.Latency.P99MS < s.Latency.P50MS {
		t.Errorf("inv latency %+v for %d calls", s.Latency, s.Calls)
	}
	// The refusal comes last; the page shows the failure that opened the
	// breaker, and when it lets probes through.
	if s.LastError == nil || s.LastError.Outcome != "gave_up" || s.LastError.Message != "GET answered 503 Service Unavailable after 1 attempt(s)" {
		t.Errorf("inv last error %+v, want the 503 that opened the breaker", s.LastError)
	}
	if s.HalfOpenAt == nil || s.BreakerChangedAt == nil || !s.HalfOpenAt.Equal(s.BreakerChangedAt.Add(time.Hour)) {
		t.Errorf("inv half-open at %v, changed at %v: want the change plus BREAKER_OPEN_TIMEOUT (1h)", s.HalfOpenAt, s.BreakerChangedAt)
	}
	if p.Latency != nil || p.LastError != nil || p.BreakerChangedAt != nil || p.HalfOpenAt != nil || p.Breaker != observe.BreakerClosed {
		t.Errorf("untouched pay: %+v", p)
	}
	var base string
	for _, v := range s.Config {
		if v.Setting == "BaseURL" {
			base = v.Value
		}
	}
	if base == "" || !strings.Contains(base, "REDACTED") {
		t.Errorf("inv BASE_URL in config: %q, want it redacted", base)
	}

	// Forced open, the override's end is what the badge shows.
	if err := inv.Force(observe.BreakerOpen, time.Minute); err != nil {
		t.Fatal(err)
	}
	var forced statuspage.Snapshot
	if err := json.Unmarshal(serve(t, statuspage.Handler(r, rec), "GET", "/status.json").Body.Bytes(), &forced); err != nil {
		t.Fatal(err)
	}
	if f := forced.Systems[0]; f.Forced == nil || f.HalfOpenAt != nil {
		t.Errorf("forced open: forced %+v, half-open at %v, want the override and no half-open time", f.Forced, f.HalfOpenAt)
	}

	// Without a recorder, the registry's Status is still all there.
	var bare statuspage.Snapshot
	if err := json.Unmarshal(serve(t, statuspage.Handler(r, nil), "GET", "/status.json").Body.Bytes(), &bare); err != nil {
		t.Fatal(err)
	}
	if b := bare.Systems[0]; b.Breaker != observe.BreakerOpen || b.Latency != nil || b.OK != 3 {
		t.Errorf("no recorder: %+v", b)
	}
}

// TestMountedUnderPrefix serves the handler under a prefix on a real
// socket, as an admin mux would, and follows the page's relative URL.
func TestMountedUnderPrefix(t *testing.T) {
	r, rec := newRegistry(t)
	mux := http.NewServeMux()
	mux.Handle("/debug/outbound/", http.StripPrefix("/debug/outbound", statuspage.Handler(r, rec)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cl := srv.Client()
	defer cl.CloseIdleConnections()
	for _, path := range []string{"/debug/outbound/", "/debug/outbound/status.json"} {
		resp, err := cl.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
}
