package statuspage_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// newControlled builds a registry of one system, inv, and serves its
// controls on a loopback listener.
func newControlled(t *testing.T, opts ...statuspage.ControlOption) (*registry.Registry, *httptest.Server) {
	t.Helper()
	reg := registrytest.New(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": "http://127.0.0.1:1"})
	srv := httptest.NewServer(statuspage.Controls(reg, opts...))
	t.Cleanup(srv.Close)
	return reg, srv
}

// post sends a POST with no body to srv's target, with hdr (a "Host"
// entry sets the Host), and returns the status and the body.
func post(t *testing.T, srv *httptest.Server, target string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// operator is what `outbound breaker --pod` sends.
var operator = map[string]string{statuspage.ControlHeader: "1"}

// TestControlsForceAndReleaseABreaker checks the operator's controls: a
// forced open shows in the system's status and refuses calls, auto
// releases it, and bad requests are refused with what is wrong.
func TestControlsForceAndReleaseABreaker(t *testing.T) {
	reg, srv := newControlled(t)
	code, body := post(t, srv, "/breaker/inv?state=open&for=10m", operator)
	var st observe.Status
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.Forced == nil || st.Breaker != observe.BreakerOpen {
		t.Fatalf("force open: %d %s", code, body)
	}
	if err := reg.MustClient("inv").Force(observe.BreakerOpen, 0); err == nil {
		t.Error("Force with no duration accepted")
	}
	if code, body := post(t, srv, "/breaker/inv?state=auto", operator); code != 200 || reg.MustClient("inv").Status().Forced != nil {
		t.Errorf("release: %d %s", code, body)
	}
	for target, want := range map[string]int{
		"/breaker/inv?state=half-open":     400,
		"/breaker/inv?state=open&for=soon": 400,
		"/breaker/inv?state=open&for=48h":  400,
		"/breaker/nope?state=open":         404,
		"/status.json":                     404,
	} {
		if code, body := post(t, srv, target, operator); code != want {
			t.Errorf("POST %s: %d %s, want %d", target, code, body, want)
		}
	}
	rec := httptest.NewRecorder()
	statuspage.Controls(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/breaker/inv?state=open", nil))
	if rec.Code != 405 {
		t.Errorf("GET: %d, want 405", rec.Code)
	}
}

// TestControlsRefuseCrossSitePost checks that what a web page open in an
// operator's browser can send is refused before it changes anything:
// the request of the attack as a whole, and each of its marks alone,
// while the operator's request from the pod's own origin, through a
// port-forward, or under a listed name goes through.
func TestControlsRefuseCrossSitePost(t *testing.T) {
	reg, srv := newControlled(t, statuspage.WithHosts("admin.shop.internal"))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	attack := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Host": "evil.example"}
	if code, body := post(t, srv, "/breaker/inv?state=open&for=24h", attack); code != http.StatusForbidden {
		t.Errorf("the attack: %d %s, want 403", code, body)
	}
	with := func(k, v string) map[string]string {
		return map[string]string{statuspage.ControlHeader: "1", k: v}
	}
	for name, hdr := range map[string]map[string]string{
		"no control header":      {"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"},
		"wrong control header":   {statuspage.ControlHeader: "yes"},
		"foreign Origin":         with("Origin", "https://evil.example"),
		"opaque Origin":          with("Origin", "null"),
		"cross-site fetch":       with("Sec-Fetch-Site", "cross-site"),
		"same-site fetch":        with("Sec-Fetch-Site", "same-site"),
		"foreign Host":           with("Host", "evil.example"),
		"foreign Host with port": with("Host", "evil.example:"+port),
	} {
		if code, body := post(t, srv, "/breaker/inv?state=open&for=24h", hdr); code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", name, code, body)
		}
	}
	if f := reg.MustClient("inv").Status().Forced; f != nil {
		t.Fatalf("a refused request forced the breaker: %+v", f)
	}
	for name, hdr := range map[string]map[string]string{
		"the CLI":            operator,
		"a same-origin page": {statuspage.ControlHeader: "1", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"},
		"a port-forward":     {statuspage.ControlHeader: "1", "Host": "localhost:8080", "Origin": "http://localhost:8080"},
		"an IPv6 address":    {statuspage.ControlHeader: "1", "Host": "[fd00::5]:9090"},
		"a listed name":      {statuspage.ControlHeader: "1", "Host": "Admin.Shop.Internal:9090", "Sec-Fetch-Site": "none"},
		"behind a proxy":     {statuspage.ControlHeader: "1", "Host": "10.0.0.5:9090", "Origin": "https://admin.shop.internal"},
	} {
		if code, body := post(t, srv, "/breaker/inv?state=open&for=1m", hdr); code != 200 {
			t.Errorf("%s: %d %s, want 200", name, code, body)
		}
	}
	if f := reg.MustClient("inv").Status().Forced; f == nil || f.State != observe.BreakerOpen {
		t.Errorf("the operator's request did not force the breaker: %+v", f)
	}
}

// TestControlsWithTokenRefuseWithoutIt checks the bearer token of
// WithToken: without it or with another, 401 and nothing changes; with
// it, the override is taken.
func TestControlsWithTokenRefuseWithoutIt(t *testing.T) {
	reg, srv := newControlled(t, statuspage.WithToken("s3cret"))
	for name, auth := range map[string]string{"none": "", "another": "Bearer s3cre", "longer": "Bearer s3cret2", "not bearer": "Basic s3cret", "bare": "s3cret"} {
		hdr := map[string]string{statuspage.ControlHeader: "1", "Authorization": auth}
		if code, body := post(t, srv, "/breaker/inv?state=open", hdr); code != http.StatusUnauthorized {
			t.Errorf("token %s: %d %s, want 401", name, code, body)
		}
	}
	if reg.MustClient("inv").Status().Forced != nil {
		t.Fatal("a request without the token forced the breaker")
	}
	hdr := map[string]string{statuspage.ControlHeader: "1", "Authorization": "Bearer s3cret"}
	if code, body := post(t, srv, "/breaker/inv?state=open", hdr); code != 200 || reg.MustClient("inv").Status().Forced == nil {
		t.Errorf("with the token: %d %s", code, body)
	}
}
