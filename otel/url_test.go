package otel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/outboundtest"
)

// TestURLFullIsTheURLSentRedacted checks url.full on attempt spans: the
// URL sent (BASE_URL's path joined to the request's), without userinfo
// or fragment, its query values redacted but for names known to be safe;
// a route the caller gave goes to url.template, not into url.full.
func TestURLFullIsTheURLSentRedacted(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	origin := up.URL // http://127.0.0.1:port
	withUser := strings.Replace(origin, "://", "://apiuser:S3cretKey@", 1)
	for _, tc := range []struct {
		name, path, route string
		want, template    string
	}{
		{"relative path under BASE_URL's", "/stock/42", "", origin + "/v1/stock/42", ""},
		{"route to url.template", "/stock/42", "/stock/{id}", origin + "/v1/stock/42", "/stock/{id}"},
		{"fragment without a query", origin + "/v1/stock/42#access_token=S3cretKey", "", origin + "/v1/stock/42", ""},
		{"query values", "/stock/42?token=S3cretKey&page=2", "", origin + "/v1/stock/42?page=2&token=REDACTED", ""},
		{"userinfo, query and fragment", withUser + "/v1/stock/42?sig=S3cretKey#S3cretKey", "", origin + "/v1/stock/42?sig=REDACTED", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, env(origin+"/v1", nil))
			if status, err := r.get(t, context.Background(), "inventory", tc.path, tc.route); err != nil || status != 200 {
				t.Fatalf("call: %d, %v", status, err)
			}
			_, attempts := r.callSpans(t)
			if len(attempts) != 1 {
				t.Fatalf("%d attempt spans, want 1", len(attempts))
			}
			attrs := spanAttrs(attempts[0])
			if got := attrs["url.full"]; got != tc.want {
				t.Errorf("url.full = %q, want %q", got, tc.want)
			}
			if got := attrs["url.template"]; got != tc.template {
				t.Errorf("url.template = %q, want %q", got, tc.template)
			}
			for k, v := range attrs {
				if strings.Contains(v, "S3cretKey") || strings.Contains(v, "apiuser") {
					t.Errorf("%s = %q shows a secret", k, v)
				}
			}
		})
	}
}
