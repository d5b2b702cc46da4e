package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// Each phase's timeout fires at its own bound, well before the next
// larger one, and names itself.

func TestTimeoutConnect(t *testing.T) {
	t.Parallel()
	addr := testutil.Blackhole(t)
	c := tbrClient(t, "http://"+addr, map[string]string{
		"CONNECT_TIMEOUT": "200ms", "TLS_HANDSHAKE_TIMEOUT": "1s", "READ_TIMEOUT": "1s",
		"CALL_TIMEOUT": "3s", "RETRIES": "0",
	})
	_, elapsed, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	t.Logf("connect timeout after %v: %v", elapsed, err)
	tbrTimeout(t, err, observe.OpConnectTimeout, 1)
	if elapsed < 180*time.Millisecond || elapsed > time.Second {
		t.Errorf("connect timeout fired after %v, want about 200ms (>= 180ms, < READ_TIMEOUT 1s)", elapsed)
	}
}

func TestTimeoutTLSHandshake(t *testing.T) {
	t.Parallel()
	addr := testutil.TLSHang(t)
	c := tbrClient(t, "https://"+addr, map[string]string{
		"CONNECT_TIMEOUT": "200ms", "TLS_HANDSHAKE_TIMEOUT": "300ms", "READ_TIMEOUT": "1s",
		"CALL_TIMEOUT": "3s", "RETRIES": "0",
	})
	_, elapsed, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	t.Logf("TLS handshake timeout after %v: %v", elapsed, err)
	tbrTimeout(t, err, observe.OpTLSTimeout, 1)
	if elapsed < 280*time.Millisecond || elapsed > time.Second {
		t.Errorf("TLS handshake timeout fired after %v, want about 300ms (>= 280ms, < READ_TIMEOUT 1s)", elapsed)
	}
}

func TestTimeoutRead(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, outboundtest.NewHang(nil))
	c := tbrClient(t, srv.URL, map[string]string{
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "300ms", "READ_TIMEOUT": "300ms", "CALL_TIMEOUT": "2s", "RETRIES": "0",
	})
	_, elapsed, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	t.Logf("read timeout after %v: %v", elapsed, err)
	tbrTimeout(t, err, observe.OpReadTimeout, 1)
	if elapsed < 280*time.Millisecond || elapsed > 1500*time.Millisecond {
		t.Errorf("read timeout fired after %v, want about 300ms (>= 280ms, well under CALL_TIMEOUT 2s)", elapsed)
	}
	if n := srv.Requests(); n != 1 {
		t.Errorf("server saw %d requests, want 1 (RETRIES=0)", n)
	}
}

// A body that trickles one byte every 900ms never trips the connect or read
// (response header) timeouts: only CALL_TIMEOUT can end it, and it does,
// even though Do itself returned long before.
func TestTimeoutCallEndsBodyRead(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, outboundtest.Trickle(900*time.Millisecond))
	c := tbrClient(t, srv.URL, map[string]string{
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "500ms", "READ_TIMEOUT": "500ms", "CALL_TIMEOUT": "2s",
	})
	start := time.Now()
	resp, _, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	elapsed := time.Since(start)
	t.Logf("body read ended after %v with %d bytes: %v", elapsed, len(b), err)
	if err == nil {
		t.Fatal("reading a never-ending body returned no error")
	}
	if elapsed < 1900*time.Millisecond || elapsed > 3500*time.Millisecond {
		t.Errorf("body read ended after %v, want at CALL_TIMEOUT 2s (>= 1.9s, < 3.5s)", elapsed)
	}
	// The read error names the system and the call timeout, and matches
	// context.DeadlineExceeded as http.Client's Timeout errors do.
	if !errors.Is(err, capbudget.ErrCallTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("body read error %v does not match capbudget.ErrCallTimeout and context.DeadlineExceeded", err)
	}
	var re *Error
	if !errors.As(err, &re) || re.Op != observe.OpCallTimeout || re.System == "" || !re.Timeout() {
		t.Errorf("body read error %v: want an *Error with Op %q naming the system", err, observe.OpCallTimeout)
	}
	if len(b) == 0 || strings.Trim(string(b), "x") != "" {
		t.Errorf("read %q, want some trickled 'x' bytes", b)
	}
	if n := srv.Requests(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

// An attempt cut by CALL_TIMEOUT ends the call: no retry follows it, even
// with retries left, and the error names the call timeout.
func TestTimeoutCallNotRetried(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, outboundtest.NewHang(nil))
	// Attempts end on the read timeout at ~0.6s and ~1.2s; the third
	// is cut by CALL_TIMEOUT at 1.7s, ~0.1s before its own read timeout.
	c := tbrClient(t, srv.URL, map[string]string{
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "600ms", "READ_TIMEOUT": "600ms", "CALL_TIMEOUT": "1700ms",
		"RETRIES": "5", "BACKOFF_BASE": "10ms", "BACKOFF_MAX": "20ms",
	})
	_, elapsed, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	t.Logf("call timeout after %v, %d requests: %v", elapsed, srv.Requests(), err)
	e := tbrTimeout(t, err, observe.OpCallTimeout, 3)
	if !errors.Is(err, capbudget.ErrCallTimeout) {
		t.Errorf("error does not match capbudget.ErrCallTimeout: %v", err)
	}
	if elapsed < 1650*time.Millisecond || elapsed > 2500*time.Millisecond {
		t.Errorf("call ended after %v, want at CALL_TIMEOUT 1.7s", elapsed)
	}
	if n := srv.Requests(); n != int64(e.Attempts) {
		t.Errorf("server saw %d requests, Error.Attempts = %d", n, e.Attempts)
	}
	if st := c.Status(); st.Retries != 2 {
		t.Errorf("Status().Retries = %d, want 2 (none after the call timeout)", st.Retries)
	}
}

// Read timeouts of an idempotent GET are retried while the call's deadline
// allows: RETRIES=2 means three requests at the server.
func TestTimeoutReadRetried(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, outboundtest.NewHang(nil))
	c := tbrClient(t, srv.URL, map[string]string{
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "300ms", "READ_TIMEOUT": "300ms", "CALL_TIMEOUT": "3s",
		"RETRIES": "2", "BACKOFF_BASE": "10ms", "BACKOFF_MAX": "20ms",
	})
	_, elapsed, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/")
	t.Logf("gave up after %v, %d requests: %v", elapsed, srv.Requests(), err)
	tbrTimeout(t, err, observe.OpReadTimeout, 3)
	if n := srv.Requests(); n != 3 {
		t.Errorf("server saw %d requests, want 3 (1 + RETRIES)", n)
	}
	if elapsed < 850*time.Millisecond || elapsed > 2500*time.Millisecond {
		t.Errorf("3 read timeouts of 300ms took %v, want ~0.9-1s", elapsed)
	}
}
