package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/outboundtest"
)

// An absolute URL of another origin is refused before any I/O, on Do and
// HTTPClient, with an error naming both origins, so that the system's
// Authorization and X-Time-Budget never go to another host; a relative
// URL and BASE_URL's own origin pass, and redirects keep
// FOLLOW_REDIRECTS.
func TestOtherOriginRefusedBeforeAnyIO(t *testing.T) {
	t.Parallel()
	other := outboundtest.NewUpstream(t, outboundtest.Healthy())
	mux := http.NewServeMux()
	mux.Handle("/v1/moved", http.RedirectHandler(other.URL+"/there", http.StatusFound))
	mux.Handle("/", outboundtest.Healthy())
	up := outboundtest.NewUpstream(t, mux)
	reg := loadRegistry(t, payEnv("http://user:s3cret@"+up.Addr()+"/v1", "FOLLOW_REDIRECTS", "any"))
	c := reg.MustClient("pay")
	ctx := tbrCtx(t, 10*time.Second)

	for name, send := range map[string]func(*http.Request) (*http.Response, error){"Do": c.Do, "HTTPClient": c.HTTPClient().Do} {
		_, _, _, err := sendRead(ctx, t, send, http.MethodGet, other.URL+"/steal?token=abc", nil)
		if !errors.Is(err, ErrOtherOrigin) {
			t.Fatalf("%s to another origin: %v, want ErrOtherOrigin", name, err)
		}
		if want := "origin " + other.URL + " is not BASE_URL's http://" + up.Addr(); !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", name, err, want)
		}
		// net/http's *url.Error around HTTPClient's shows the URL as the
		// caller wrote it; outbound's own error shows only origins.
		var e *Error
		if errors.As(err, &e); e == nil || strings.Contains(e.Error(), "s3cret") || strings.Contains(e.Error(), "abc") {
			t.Errorf("%s: the error shows a secret: %v", name, e)
		}
		t.Logf("%s: %v", name, err)
	}
	if other.Requests() != 0 {
		t.Fatalf("the other origin got %d requests, want 0", other.Requests())
	}
	// BASE_URL's origin, absolute (default port spelled or not), and a
	// redirect to the other origin under FOLLOW_REDIRECTS=any pass.
	for _, u := range []string{"http://" + up.Addr() + "/v1/x", "/x", "/moved"} {
		if status, _, _, err := sendRead(ctx, t, c.Do, http.MethodGet, u, nil); err != nil || status != 200 {
			t.Errorf("GET %s: %d, %v; want 200", u, status, err)
		}
	}
	if other.Requests() != 1 {
		t.Errorf("the redirect reached the other origin %d times, want 1", other.Requests())
	}
}

// A relative path whose ".." would climb above BASE_URL's path is refused
// before any I/O; ".." that stays inside is sent.
func TestPathEscapingBaseRefusedBeforeAnyIO(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	r := loadRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL + "/v1"})
	defer r.Close()
	c := r.MustClient("inv")
	for _, p := range []string{"/stock/../../admin", "../x", "a/../../b", "/..;/admin", `/..\admin`} {
		res := resilGet(c, p, resilBound)
		if !errors.Is(res.err, ErrPathEscapesBase) {
			t.Errorf("%s: %v, want ErrPathEscapesBase", p, res)
		}
	}
	if n := srv.Hits(); n != 0 {
		t.Fatalf("server saw %d requests, want 0", n)
	}
	if res := resilGet(c, "/stock/a/../42", resilBound); res.err != nil || res.status != 200 {
		t.Fatalf("a path that stays inside: %v", res)
	}
}

// HTTPClient() sends BASE_URL's userinfo as Basic auth, as Do does.
func TestHTTPClientSendsBaseURLUserinfoAsBasicAuth(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv",
		"INV_BASE_URL":     strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1),
	})
	defer r.Close()
	c := r.MustClient("inv")
	res := resilGet(c, "/do", resilBound)
	if res.err != nil {
		t.Fatal(res.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resilBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/sdk", nil)
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for _, got := range srv.Received() {
		if u, p, ok := (&http.Request{Header: got.Header}).BasicAuth(); !ok || u != "alice" || p != "s3cret" {
			t.Errorf("%s: basic auth %q %q %v, want alice s3cret", got.Path, u, p, ok)
		}
	}
	if hc := c.HTTPClient(); hc == c.HTTPClient() {
		t.Error("HTTPClient returns one shared *http.Client: a library that sets its Timeout changes it for everyone")
	}
}

// TestPathEscapingBaseErrorNamesTheRedactedPath checks that the refusal
// of a path that climbs above BASE_URL names that path, with its query
// values redacted as in every error of Do. (Through HTTPClient, net/http's
// *url.Error names the caller's own URL, and the *Error inside does not
// repeat it.)
func TestPathEscapingBaseErrorNamesTheRedactedPath(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
	r := loadRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL + "/v1"})
	defer r.Close()
	c := r.MustClient("inv")
	res := resilGet(c, "/stock/../../admin?api_key=s3cret&page=2", resilBound)
	var e *Error
	if !errors.Is(res.err, ErrPathEscapesBase) || !errors.As(res.err, &e) {
		t.Fatalf("%v, want an *Error matching ErrPathEscapesBase", res)
	}
	msg := e.Error()
	if !strings.Contains(msg, `GET "/stock/../../admin?api_key=`) || !strings.Contains(msg, "page=2") {
		t.Errorf("%q, want it to name the path and its safe query values", msg)
	}
	if strings.Contains(msg, "s3cret") || strings.Contains(e.URL, "s3cret") {
		t.Errorf("%q shows the query's secret value", msg)
	}
	if n := srv.Hits(); n != 0 {
		t.Fatalf("server saw %d requests, want 0", n)
	}
}
