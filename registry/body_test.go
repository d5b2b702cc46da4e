package registry

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/outbound-go/outbound/outboundtest"
)

// TestForgottenBodyComesBackWhenCallerCancels checks that a body never
// closed gives its permit back when the caller's context ends, long
// before CALL_TIMEOUT: the permit watches the caller's context and the
// deadline apart. It fails (still in flight after 5s) without the watch
// on the caller's context.
func TestForgottenBodyComesBackWhenCallerCancels(t *testing.T) {
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	c := mtlsRegistry(t, map[string]map[string]string{"forgot": {
		"BASE_URL": srv.URL, "CALL_TIMEOUT": "1m", "MAX_CONCURRENT": "1", "BULKHEAD_MAX_WAIT": "0",
	}}).MustClient("forgot")
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
