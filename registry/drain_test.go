package registry

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

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
		case <-outboundtest.Stopped(r):
		}
	})
}

// A 503 whose body stalls after the headers is drained for at most about
// 50ms before the retry, not until CALL_TIMEOUT.
func TestDrainBeforeRetryDoesNotWaitOnAStalledBody(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Handler: stalledBody(http.StatusServiceUnavailable, nil)},
		outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
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

// Giving up because the Retry-After would pass the deadline drains the
// response too, and does not wait on a stalled body either.
func TestDrainBeforeGivingUpDoesNotWaitOnAStalledBody(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Handler: stalledBody(http.StatusTooManyRequests, outboundtest.RetryAfterSeconds(5))})
	c := tbrClient(t, srv.URL, tbrFast("RETRIES", "2", "READ_TIMEOUT", "1s", "CALL_TIMEOUT", "3s", "RETRY_AFTER_MAX", "10s"))
	_, took, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	e := tbrError(t, err, observe.OpStatus)
	t.Logf("gave up in %v: %v", took, e)
	if took > 1500*time.Millisecond {
		t.Errorf("took %v: giving up waited on the stalled body", took)
	}
}

// Close drains a small unread body, but not for longer than a moment: an
// upstream that stalls mid-body must not hold the caller's Close until
// CALL_TIMEOUT.
func TestCloseDoesNotWaitOnAStalledBody(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		_, _ = io.WriteString(w, "0123456789")
		w.(http.Flusher).Flush()
		outboundtest.Wait(r, time.Hour) // stalls until the client goes away
	}))
	r := loadRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL, "INV_CALL_TIMEOUT": "15s"})
	defer r.Close()
	c := r.MustClient("inv")
	ctx, cancel := context.WithTimeout(context.Background(), resilBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/stall", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp.Body.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v on a stalled body, want about 50ms", took)
	}
	if n := c.Status().InFlight; n != 0 {
		t.Fatalf("InFlight %d after Close, want 0", n)
	}
}
