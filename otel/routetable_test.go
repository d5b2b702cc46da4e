package otel

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// TestSpanRoutesFollowTheStatus checks the routes the spans match: read
// from Status, matched against the path sent (a relative path under
// BASE_URL's), and replaced when Status lists other routes (a live
// change), or none.
func TestSpanRoutesFollowTheStatus(t *testing.T) {
	s := newSystem("payments")
	st := observe.Status{Config: []config.Var{{Setting: "BaseURL", Value: "https://pay.example/v1"}},
		Routes: []observe.RouteStatus{{Name: "get-charge", Match: "GET /v1/charges/{id}"}, {Name: "create", Match: "POST /v1/charges"}}}
	s.learnStatus(&st)
	match := func(method, target string) string {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		if ri := s.routes.Load().match(&http.Request{Method: method, URL: u}); ri != nil {
			return ri.name + " " + ri.template
		}
		return ""
	}
	for _, tc := range []struct{ method, target, want string }{
		{"GET", "/charges/ch_1", "get-charge /v1/charges/{id}"},
		{"", "/charges/ch_1", "get-charge /v1/charges/{id}"},
		{"HEAD", "https://pay.example/v1/charges/ch_1", "get-charge /v1/charges/{id}"},
		{"POST", "/charges", "create /v1/charges"},
		{"POST", "/charges/ch_1", ""},
		{"GET", "/v2/charges/ch_1", ""},
	} {
		if got := match(tc.method, tc.target); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.target, got, tc.want)
		}
	}

	st.Routes = []observe.RouteStatus{{Name: "list", Match: "GET /v1/charges/{$}"}}
	s.learnStatus(&st)
	if got := match("GET", "/charges/ch_1"); got != "" {
		t.Errorf("after a change, the old route still matches: %q", got)
	}
	if got := match("GET", "/charges/"); got != "list /v1/charges/{$}" {
		t.Errorf("after a change, the new route: %q", got)
	}
	st.Routes = nil
	s.learnStatus(&st)
	if s.routes.Load() != nil {
		t.Error("routes left after Status listed none")
	}
}
