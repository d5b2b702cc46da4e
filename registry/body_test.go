package registry

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// TestForgottenBodyComesBackWhenCallerCancels checks that a body never
// closed gives its permit back when the caller's context ends, long
// before CALL_TIMEOUT: the permit watches the caller's context and the
// deadline apart. It fails (still in flight after 5s) without the watch
// on the caller's context.
func TestForgottenBodyComesBackWhenCallerCancels(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	c := loadRegistry(t, systemsEnv(map[string]map[string]string{"forgot": {
		"BASE_URL": srv.URL, "CALL_TIMEOUT": "1m", "MAX_CONCURRENT": "1", "BULKHEAD_MAX_WAIT": "0",
	}})).MustClient("forgot")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // at the end only: forgotten until then
	if got := c.Status().InFlight; got != 1 {
		t.Fatalf("in flight with the body open = %d, want 1", got)
	}
	start := time.Now()
	cancel()
	for c.Status().InFlight != 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the permit is still held 5s after the caller cancelled (CALL_TIMEOUT 1m)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("permit back %v after the caller cancelled", time.Since(start).Round(time.Millisecond))
}

// A read of a body that another goroutine closed says so, rather than
// blaming the caller's cancellation.
func TestReadAfterCloseByAnotherGoroutineSaysBodyClosed(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, outboundtest.Trickle(time.Hour))
	c := tbrClient(t, srv.URL, tbrFast())
	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/")
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	time.Sleep(50 * time.Millisecond) // the reader is blocked in Read
	_ = resp.Body.Close()
	err = <-read
	e := tbrError(t, err, observe.OpBodyClosed)
	if errors.Is(err, context.Canceled) {
		t.Errorf("%v matches context.Canceled", e)
	}
	t.Log(e)
}

// A response without a body (204, HEAD) gives its permit back at once,
// even if the caller never closes it.
func TestBodylessResponseReleasesPermitAtOnce(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusNoContent})
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL, "INV_MAX_CONCURRENT": "1",
	})
	defer r.Close()
	c := r.MustClient("inv")
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		req, _ := http.NewRequestWithContext(ctx, http.MethodHead, "/x", nil)
		resp, err := c.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v (a body-less response kept the only permit)", i+1, err)
		}
		_ = resp // never closed
	}
	if n := c.Status().InFlight; n != 0 {
		t.Fatalf("InFlight %d after body-less responses, want 0", n)
	}
}

// Over HTTP/2 too (its empty body is not http.NoBody), a response without
// a body gives its permit back at once, even if never closed.
func TestBodylessHTTP2ResponseReleasesPermitAtOnce(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/empty" {
			w.Header().Set("Content-Length", "0")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	caFile := testutil.WriteFile(t, t.TempDir(), "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL, "INV_MAX_CONCURRENT": "1", "INV_TLS_CA_FILE": caFile,
	})
	defer r.Close()
	c := r.MustClient("inv")
	for i, m := range []struct{ method, path string }{{"HEAD", "/x"}, {"GET", "/204"}, {"GET", "/empty"}, {"GET", "/204"}} {
		ctx, cancel := context.WithTimeout(context.Background(), resilBound)
		req, _ := http.NewRequestWithContext(ctx, m.method, m.path, nil)
		resp, err := c.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("call %d (%s %s): %v (a body-less HTTP/2 response kept the only permit)", i+1, m.method, m.path, err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("call %d: HTTP/%d, want HTTP/2", i+1, resp.ProtoMajor)
		}
		// never closed
	}
	if n := c.Status().InFlight; n != 0 {
		t.Fatalf("InFlight %d after body-less HTTP/2 responses, want 0", n)
	}
	c.HTTPClient().CloseIdleConnections()
}
