package registry

import (
	"net/http"
	"net/url"
	"testing"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestSameComparesSchemeHostAndDefaultPort(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"https://pay.example/v1", "https://PAY.example:443/x", true},
		{"http://h", "http://h:80", true},
		{"http://h:8080", "http://h:8081", false},
		{"http://127.0.0.1:8443", "http://127.0.0.1:9000", false},
		{"http://h", "https://h", false},
		{"https://h", "https://h.evil", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	} {
		if got := sameOrigin(mustURL(t, c.a), mustURL(t, c.b)); got != c.want {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	a, b := mustURL(t, "https://a.example/x"), mustURL(t, "https://A.example:443/y")
	if n := testing.AllocsPerRun(100, func() { sameOrigin(a, b) }); n != 0 {
		t.Errorf("sameOrigin allocates %v times", n)
	}
}

func TestStringShowsOnlyTheOrigin(t *testing.T) {
	if got := urlString(mustURL(t, "HTTPS://user:pw@Pay.Example/v1?key=s")); got != "https://pay.example:443" {
		t.Errorf("urlString = %q", got)
	}
}

func TestEscapesBase(t *testing.T) {
	for p, want := range map[string]bool{
		"/stock/42": false, "stock/42": false, "a/../b": false, "./x": false, "/..x/y": false,
		"../admin": true, "a/../../x": true, "/..": true, "..;/admin": true, `..\admin`: true,
	} {
		if got := escapesBase(p); got != want {
			t.Errorf("escapesBase(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestResolveJoinsPathAndQuery(t *testing.T) {
	for _, c := range []struct{ base, rel, want string }{
		{"https://h/v1", "/stock/42", "https://h/v1/stock/42"},
		{"https://h/v1/", "stock/42?x=1", "https://h/v1/stock/42?x=1"},
		{"https://h/v1?key=k", "/s?x=1", "https://h/v1/s?key=k&x=1"},
		{"https://h", "/a%2Fb", "https://h/a%2Fb"},
	} {
		if got := resolveRef(mustURL(t, c.base), mustURL(t, c.rel)).String(); got != c.want {
			t.Errorf("resolveRef(%s, %s) = %s, want %s", c.base, c.rel, got, c.want)
		}
	}
}

func TestUnderKeepsRedirectsBelowBasePath(t *testing.T) {
	base := mustURL(t, "https://h.example/v1")
	for u, want := range map[string]bool{
		"https://h.example/v1":            true,
		"https://h.example/v1/up":         true,
		"https://h.example/v1/":           true,
		"https://h.example/v10/x":         false,
		"https://h.example/admin/secret":  false,
		"https://h.example/v1/../admin":   false,
		"https://h.example/v1/%2e%2e/adm": false,
		"https://h.example/v1/..;/admin":  false,
		"https://other.example/v1/up":     false,
		"http://h.example/v1/up":          false,
	} {
		if got := underBase(mustURL(t, u), base); got != want {
			t.Errorf("underBase(%s, %s) = %v, want %v", u, base, got, want)
		}
	}
	if !underBase(mustURL(t, "https://h.example/anything"), mustURL(t, "https://h.example/")) {
		t.Error("a base without a path must hold every path of its origin")
	}
}

func TestStripCredentialsDropsAPIKeysAndTheBudget(t *testing.T) {
	h := http.Header{}
	for _, k := range []string{"Authorization", "Cookie", "Idempotency-Key", "X-Api-Key", "Api-Key", "X-Auth-Token", "X-Time-Budget", "Accept"} {
		h.Set(k, "v")
	}
	stripCredentials(h)
	if len(h) != 1 || h.Get("Accept") != "v" {
		t.Errorf("after stripCredentials: %v, want Accept alone", h)
	}
}

func TestBasicAuthNeverOverridesTheCallersAuthorization(t *testing.T) {
	u := url.UserPassword("svc", "s3cret")
	h := http.Header{}
	if !setBasicAuth(h, u) || h.Get("Authorization") != "Basic c3ZjOnMzY3JldA==" {
		t.Errorf("Authorization = %q", h.Get("Authorization"))
	}
	h = http.Header{"Authorization": {"Bearer t"}}
	if setBasicAuth(h, u) || h.Get("Authorization") != "Bearer t" {
		t.Errorf("the caller's Authorization was replaced: %q", h.Get("Authorization"))
	}
	if setBasicAuth(http.Header{}, nil) {
		t.Error("no userinfo set an Authorization")
	}
}
