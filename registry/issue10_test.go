package registry

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
)

// Regression tests for issue 10, named after its items.

// stalledBody answers status with header, a Content-Length of 1000 and 10
// bytes of body, then stalls until the client goes away or the server
// stops.
func stalledBody(status int, header http.Header) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "0123456789")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-testutil.Stopped(r):
		}
	})
}

// Item 1: a 503 whose body stalls after the headers is drained for at most
// about 50ms before the retry, not until CALL_TIMEOUT.
func TestIssue10StalledDrainBeforeRetry(t *testing.T) {
	srv := testutil.Script(t, testutil.Resp{Handler: stalledBody(http.StatusServiceUnavailable, nil)},
		testutil.Resp{Status: http.StatusOK, Body: "ok"})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "1", "READ_TIMEOUT", "1s", "CALL_TIMEOUT", "3s"))
	resp, took, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do after %v: %v", took, err)
	}
	if resp.StatusCode != http.StatusOK || tbrRead(t, resp) != "ok" {
		t.Fatalf("got status %d, want 200 ok", resp.StatusCode)
	}
	t.Logf("stalled 503, then 200, in %v (CALL_TIMEOUT 3s)", took)
	if srv.Hits() != 2 {
		t.Errorf("server saw %d requests, want 2", srv.Hits())
	}
	if took > 1500*time.Millisecond {
		t.Errorf("took %v: the drain before the retry waited on the stalled body", took)
	}
}

// Item 1, the other drain: giving up because the Retry-After would pass
// the deadline does not wait on a stalled body either.
func TestIssue10StalledDrainBeforeGivingUp(t *testing.T) {
	srv := testutil.Script(t, testutil.Resp{Handler: stalledBody(http.StatusTooManyRequests, testutil.RetryAfterSeconds(5))})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2", "READ_TIMEOUT", "1s", "CALL_TIMEOUT", "3s", "RETRY_AFTER_MAX", "10s"))
	_, took, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	e := tbrError(t, err, OpStatus)
	t.Logf("gave up in %v: %v", took, e)
	if took > 1500*time.Millisecond {
		t.Errorf("took %v: giving up waited on the stalled body", took)
	}
}

// Item 2: a small chunked body closed unread keeps its connection.
func TestIssue10ChunkedBodyClosedUnread(t *testing.T) {
	srv := testutil.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush() // headers first: the body is chunked
		_, _ = io.WriteString(w, strings.Repeat("c", 1024))
	}))
	c := tbrClient(t, srv.URL, tbrFast())
	const calls = 50
	for i := range calls {
		resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if resp.ContentLength != -1 {
			t.Fatalf("ContentLength = %d, want -1 (chunked)", resp.ContentLength)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatalf("call %d: Close: %v", i+1, err)
		}
	}
	if n := srv.Conns(); n != 1 {
		t.Fatalf("%d calls whose chunked bodies were closed unread opened %d connections, want 1", calls, n)
	}
}

// Item 3: a Retry-After of 2^32 seconds or more is a valid (huge) delay,
// longer than RETRY_AFTER_MAX: the call ends with the response.
func TestIssue10RetryAfterHuge(t *testing.T) {
	for _, v := range []string{"4294967296", "99999999999999999999999"} {
		t.Run(v, func(t *testing.T) {
			srv := testutil.Script(t, testutil.Resp{Status: http.StatusServiceUnavailable,
				Header: http.Header{"Retry-After": {v}}, Body: "busy"})
			c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2"))
			resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || tbrRead(t, resp) != "busy" {
				t.Fatalf("got %d, want the 503", resp.StatusCode)
			}
			if n := srv.Hits(); n != 1 {
				t.Fatalf("server saw %d attempts, want 1 (hint above RETRY_AFTER_MAX)", n)
			}
		})
	}
}

var _ = errors.New
