package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// sse answers a text/event-stream of n events, one every interval, each
// flushed; after stallAfter events (0: never) it stalls until the client
// goes away or the upstream stops.
func sse(n int, every time.Duration, stallAfter int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for i := 1; i <= n; i++ {
			if i > 1 && !outboundtest.Wait(r, every) {
				return
			}
			_, _ = io.WriteString(w, "data: "+strconv.Itoa(i)+"\n\n")
			_ = rc.Flush()
			if i == stallAfter {
				select { // until the client goes away or the upstream stops
				case <-r.Context().Done():
				case <-outboundtest.Stopped(r):
				}
				return
			}
		}
	})
}

// sseEnv is a system whose CALL_TIMEOUT (1.3s) is shorter than the
// stream sse(40, 50ms, 0) (about 2s).
func sseEnv(url string) map[string]string {
	return payEnv(url, "CONNECT_TIMEOUT", "100ms", "TLS_HANDSHAKE_TIMEOUT", "100ms", "READ_TIMEOUT", "200ms", "CALL_TIMEOUT", "1300ms",
		"RETRIES", "0", "MAX_CONCURRENT", "2")
}

// A stream (WithStream) outlives CALL_TIMEOUT, holding its permit until
// the body is closed. Without WithStream, CALL_TIMEOUT cuts the same
// stream.
func TestStreamOutlivesCallTimeout(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, sse(40, 50*time.Millisecond, 0))
	reg := loadRegistry(t, sseEnv(up.URL))
	c := reg.MustClient("pay")
	for name, send := range map[string]func(*http.Request) (*http.Response, error){"Do": c.Do, "HTTPClient": c.HTTPClient().Do} {
		req, _ := http.NewRequestWithContext(WithStream(tbrCtx(t, 10*time.Second), time.Second), http.MethodGet, up.URL+"/events", nil)
		resp, err := send(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st := c.Status(); st.InFlight != 1 {
			t.Errorf("%s: in flight with the stream open = %d, want 1 (its permit)", name, st.InFlight)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: reading the stream: %v after %d events", name, err, strings.Count(string(b), "data:"))
		}
		if got := strings.Count(string(b), "data:"); got != 40 {
			t.Errorf("%s: %d events, want 40", name, got)
		}
		_ = resp.Body.Close()
	}
	// Without WithStream, CALL_TIMEOUT cuts the same stream.
	req, _ := http.NewRequestWithContext(tbrCtx(t, 10*time.Second), http.MethodGet, up.URL+"/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	var e *Error
	if !errors.As(err, &e) || e.Op != observe.OpCallTimeout {
		t.Errorf("without WithStream: %v after %d events, want a call timeout", err, strings.Count(string(b), "data:"))
	}
}

// A stream that stalls is cut by its idle bound, with
// observe.OpIdleTimeout, and its permit goes back; the headers still obey
// READ_TIMEOUT.
func TestStreamStallCutByIdleBound(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/stall", sse(40, 10*time.Millisecond, 3))
	mux.Handle("/slow", outboundtest.SlowHeaders(time.Minute))
	up := outboundtest.NewUpstream(t, mux)
	reg := loadRegistry(t, sseEnv(up.URL))
	c := reg.MustClient("pay")
	ctx := WithStream(tbrCtx(t, 10*time.Second), 150*time.Millisecond)

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/stall", nil)
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	var e *Error
	if !errors.As(err, &e) || e.Op != observe.OpIdleTimeout || !e.Timeout() || errors.Is(err, context.Canceled) {
		t.Fatalf("stalled stream: %v (%#v), want an idle timeout, not a cancellation", err, e)
	}
	if got := strings.Count(string(b), "data:"); got != 3 {
		t.Errorf("%d events before the stall, want 3", got)
	}
	t.Logf("stalled stream: %v", err)
	_ = resp.Body.Close()
	if st := c.Status(); st.InFlight != 0 {
		t.Errorf("in flight after the stream's end = %d, want 0 (the permit given back)", st.InFlight)
	}

	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "/slow", nil)
	if _, err := c.Do(req); !errors.As(err, &e) || e.Op != observe.OpReadTimeout {
		t.Errorf("slow headers on a stream: %v, want a read timeout", err)
	}
}

// Before its headers a stream is an ordinary call: CALL_TIMEOUT still
// bounds its attempts and retries together, with the same error.
func TestStreamHeadersBoundByCallTimeout(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
	env := sseEnv(up.URL)
	env["PAY_RETRIES"], env["PAY_BACKOFF_BASE"], env["PAY_BACKOFF_MAX"] = "10", "100ms", "100ms"
	reg := loadRegistry(t, env)
	c := reg.MustClient("pay")
	req, _ := http.NewRequestWithContext(WithStream(tbrCtx(t, 10*time.Second), time.Minute), http.MethodGet, "/", nil)
	_, err := c.Do(req)
	var e *Error
	if !errors.As(err, &e) || e.Op != observe.OpCallTimeout || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("stream whose headers never come: %v, want a call timeout", err)
	}
	if n := up.Requests(); n >= 11 {
		t.Errorf("%d attempts: CALL_TIMEOUT did not cut the retries", n)
	}
	t.Logf("%v (%d requests)", err, up.Requests())
}
