package registry

import (
	"context"
	"encoding/json"
	"errors"
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

// TestHTTPClientAnswersAnErrorItGaveUpOnWithAFinalResponse checks that
// through HTTPClient a replayable call that the retry stage retried and
// gave up on with an error (a read timeout, a reset) is answered with a
// response the SDKs stop on: 504 for a timeout, 502 for a transport
// error, the SDKs' "do not retry" headers, the op and the attempts sent
// (read back by GaveUp), and the common error envelope. A POST that was
// not replayable keeps the error, for the SDK to judge, and Do returns
// the *Error as it always did.
func TestHTTPClientAnswersAnErrorItGaveUpOnWithAFinalResponse(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		outboundtest.Reset().ServeHTTP(w, r)
	}))
	reg := loadRegistry(t, payEnv(up.URL, "RETRIES", "2", "CONNECT_TIMEOUT", "100ms", "TLS_HANDSHAKE_TIMEOUT", "100ms",
		"READ_TIMEOUT", "200ms", "BREAKER_MIN_REQUESTS", "1000"))
	c := reg.MustClient("pay")
	for _, tc := range []struct {
		path, op, code string
		status         int
	}{{"/hang", "read timeout", "read_timeout", http.StatusGatewayTimeout}, {"/reset", "transport", "transport", http.StatusBadGateway}} {
		before := up.Requests()
		status, h, body, err := sendRead(tbrCtx(t, 10*time.Second), t, c.HTTPClient().Do, http.MethodGet, tc.path, nil)
		if err != nil || status != tc.status {
			t.Fatalf("%s: %d, %v; want a %d response", tc.path, status, err, tc.status)
		}
		if h.Get("X-Should-Retry") != "false" || h.Get("Stripe-Should-Retry") != "false" || h.Get(GaveUpHeader) != tc.op {
			t.Errorf("%s: header %v, want final, giving up on %s", tc.path, h, tc.op)
		}
		var e *Error
		if gu := GaveUp(h); !errors.As(gu, &e) || e.System != "pay" || e.Op.String() != tc.op || e.Attempts != 3 {
			t.Errorf("%s: GaveUp = %v, want pay's %s after 3 attempts", tc.path, gu, tc.op)
		}
		var env struct {
			Error struct{ Type, Code, Message string }
		}
		if json.Unmarshal([]byte(body), &env) != nil || env.Error.Type != "outbound_gave_up" || env.Error.Code != tc.code ||
			!strings.Contains(env.Error.Message, tc.op) {
			t.Errorf("%s: body %q, want the error envelope of %s", tc.path, body, tc.code)
		}
		if n := up.Requests() - before; n != 3 {
			t.Errorf("%s: %d upstream requests, want 3", tc.path, n)
		}
	}
	if _, _, _, err := sendRead(tbrCtx(t, 10*time.Second), t, c.HTTPClient().Do, http.MethodPost, "/reset", nil); err == nil {
		t.Error("a POST without Idempotency-Key that was reset: no error, want it passed to the SDK")
	}
	if _, _, _, err := sendRead(tbrCtx(t, 10*time.Second), t, c.Do, http.MethodGet, "/reset", nil); !errors.As(err, new(*Error)) {
		t.Errorf("Do: %v, want the *Error", err)
	}
}

// TestUpstreamCannotForgeGivingUp checks that an upstream's response
// never carries the marker of a call given up on.
func TestUpstreamCannotForgeGivingUp(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: 504,
		Header: http.Header{GaveUpHeader: {"read timeout"}, "X-Outbound-Attempts": {"3"}}})
	reg := loadRegistry(t, payEnv(up.URL, "RETRIES", "0"))
	c := reg.MustClient("pay")
	_, h, _, err := sendRead(tbrCtx(t, 10*time.Second), t, c.HTTPClient().Do, http.MethodGet, "/", nil)
	if err != nil || h.Get(GaveUpHeader) != "" || h.Get("X-Outbound-Attempts") != "" || GaveUp(h) != nil {
		t.Errorf("upstream's marker came through: %v, %v", h, err)
	}
}
