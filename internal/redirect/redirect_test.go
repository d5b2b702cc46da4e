package redirect

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hops is an upstream that answers /r?to=X with a 307 to X and anything
// else with 200, and records what each hop carried.
type hops struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
	path []string
}

func newHops(t *testing.T) *hops {
	h := &hops{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Clone())
		h.path = append(h.path, r.URL.Path)
		h.mu.Unlock()
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
			return
		}
		_, _ = w.Write([]byte("end"))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hops) follow(t *testing.T, p *Policy, target string, hdr http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, target, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := follow(p, req, tr.RoundTrip)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

// follow sends first and follows its redirects, as the registry does.
func follow(p *Policy, first *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	resp, err := send(first)
	if err != nil || !p.Redirected(resp) {
		return resp, err
	}
	return p.Follow(first, resp, send)
}

func credentials() http.Header {
	return http.Header{"Authorization": {"Bearer t"}, "X-Api-Key": {"k"}, "Api-Key": {"k"},
		"X-Auth-Token": {"k"}, "X-Time-Budget": {"900"}, "Idempotency-Key": {"i"}, "Accept": {"text/plain"}}
}

// TestSameHostDoesNotFollowOutOfBasePath checks that a redirect to the
// same host but outside BASE_URL's path is the caller's answer, so the
// caller's Authorization never reaches another API of that host.
func TestSameHostDoesNotFollowOutOfBasePath(t *testing.T) {
	h := newHops(t)
	base, _ := url.Parse(h.URL + "/v1")
	p := New("same-host", 3, base)
	resp := h.follow(t, p, h.URL+"/v1/up?to=/admin/secret", credentials())
	if resp.StatusCode != http.StatusTemporaryRedirect || len(h.path) != 1 {
		t.Fatalf("status %d after %v, want the 307 itself and one hop", resp.StatusCode, h.path)
	}
	resp = h.follow(t, p, h.URL+"/v1/up?to=/v1/down", credentials())
	if resp.StatusCode != http.StatusOK || h.path[len(h.path)-1] != "/v1/down" {
		t.Fatalf("status %d after %v, want /v1/down followed", resp.StatusCode, h.path)
	}
	if got := h.seen[len(h.seen)-1].Get("Authorization"); got != "Bearer t" {
		t.Errorf("a redirect under BASE_URL lost the Authorization: %q", got)
	}
}

// TestAnyDropsCredentialsOnceTheChainLeavesBase checks that with "any"
// a hop to another host, and every hop after it, carries none of the
// credential headers (API keys included) nor the time budget.
func TestAnyDropsCredentialsOnceTheChainLeavesBase(t *testing.T) {
	a, b := newHops(t), newHops(t)
	base, _ := url.Parse(a.URL + "/v1")
	p := New("any", 5, base)
	back := a.URL + "/v1/end"
	resp := a.follow(t, p, a.URL+"/v1/up?to="+url.QueryEscape(b.URL+"/x?to="+url.QueryEscape(back)), credentials())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if len(b.seen) != 1 || len(a.seen) != 2 {
		t.Fatalf("hops: a %v, b %v", a.path, b.path)
	}
	for _, h := range []http.Header{b.seen[0], a.seen[1]} {
		for _, k := range []string{"Authorization", "X-Api-Key", "Api-Key", "X-Auth-Token", "X-Time-Budget", "Idempotency-Key"} {
			if v := h.Get(k); v != "" {
				t.Errorf("%s = %q followed the chain out of BASE_URL", k, v)
			}
		}
		if h.Get("Accept") != "text/plain" {
			t.Errorf("Accept was dropped: %v", h)
		}
	}
}

// TestAnyDropsCredentialsOutOfBasePathOnTheSameHost checks that with
// "any" a same-host hop outside BASE_URL's path is followed without the
// credentials.
func TestAnyDropsCredentialsOutOfBasePathOnTheSameHost(t *testing.T) {
	h := newHops(t)
	base, _ := url.Parse(h.URL + "/v1")
	resp := h.follow(t, New("any", 3, base), h.URL+"/v1/up?to=/admin/secret", credentials())
	if resp.StatusCode != http.StatusOK || h.path[1] != "/admin/secret" {
		t.Fatalf("status %d, hops %v", resp.StatusCode, h.path)
	}
	if got := h.seen[1].Get("Authorization"); got != "" {
		t.Errorf("Authorization %q reached /admin/secret", got)
	}
}

// TestLimitAnswersWithTheLastRedirect checks that MAX_REDIRECTS bounds
// the hops and the last 3xx is the answer.
func TestLimitAnswersWithTheLastRedirect(t *testing.T) {
	h := newHops(t)
	base, _ := url.Parse(h.URL)
	loop := "/a?to=" + url.QueryEscape("/a?to=/a")
	resp := h.follow(t, New("any", 1, base), h.URL+loop, nil)
	if resp.StatusCode != http.StatusTemporaryRedirect || len(h.path) != 2 {
		t.Errorf("status %d after %d hops, want a 307 after 2", resp.StatusCode, len(h.path))
	}
}

// TestNoneNeverFollows checks the "none" policy.
func TestNoneNeverFollows(t *testing.T) {
	h := newHops(t)
	base, _ := url.Parse(h.URL)
	resp := h.follow(t, New("none", 3, base), h.URL+"/a?to=/b", nil)
	if resp.StatusCode != http.StatusTemporaryRedirect || len(h.path) != 1 {
		t.Errorf("status %d after %v", resp.StatusCode, h.path)
	}
}

// TestBadLocationIsAnError checks that an unparsable Location ends the
// call with an error and closes the response.
func TestBadLocationIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://[::1")
		w.WriteHeader(http.StatusFound)
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err := follow(New("any", 3, base), req, tr.RoundTrip)
	if err == nil || !strings.Contains(err.Error(), "Location") {
		t.Errorf("err = %v, want one naming the Location", err)
	}
}
