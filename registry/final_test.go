package registry

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/outboundtest"
)

// TestHTTPClientSaysItsAnswerIsFinalOnceItRetried checks that through
// HTTPClient a temporary status the retry stage retried and gave up on
// tells the SDK not to retry, with a body every SDK family reads as an
// error, while a request that was not safe to replay (not retried) keeps
// the upstream's answer as it is, for the SDK to judge, and so does Do.
func TestHTTPClientSaysItsAnswerIsFinalOnceItRetried(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable,
		Header: http.Header{"Content-Type": {"text/html"}}, Body: "<html>down</html>"})
	c := rateClient(t, up.URL, map[string]string{"RETRIES": "2"})
	send := func(do func(*http.Request) (*http.Response, error), method string) (*http.Response, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, "/", strings.NewReader("x"))
		resp, err := do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp, string(b)
	}
	resp, body := send(c.HTTPClient().Do, http.MethodGet)
	var doc struct {
		Error struct{ Type, Code, Message string }
	}
	if resp.StatusCode != 503 || resp.Header.Get("X-Should-Retry") != "false" || resp.Header.Get("Stripe-Should-Retry") != "false" ||
		json.Unmarshal([]byte(body), &doc) != nil || doc.Error.Code != "status_503" || doc.Error.Message != "<html>down</html>" ||
		resp.Header.Get("X-Outbound-Original-Content-Type") != "text/html" {
		t.Errorf("GET retried and given up: %v %q, want a final 503 with the error envelope", resp.Header, body)
	}
	before := up.Requests()
	resp, body = send(c.HTTPClient().Do, http.MethodPost)
	if up.Requests()-before != 1 || resp.Header.Get("X-Should-Retry") != "" || body != "<html>down</html>" {
		t.Errorf("POST not retried: %d requests, %v %q; want the upstream's answer as it is", up.Requests()-before, resp.Header, body)
	}
	resp, body = send(c.Do, http.MethodGet)
	if resp.Header.Get("X-Should-Retry") != "" || body != "<html>down</html>" {
		t.Errorf("Do: %v %q, want the upstream's answer as it is", resp.Header, body)
	}
}
