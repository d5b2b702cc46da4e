package outboundtest_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// The faults seen through a registry client: what an adapter meets.

// env returns the variables of one system "inventory" at baseURL, with
// quick backoffs, and kv (names and values alternating) on top.
func env(baseURL string, kv ...string) map[string]string {
	m := map[string]string{
		"OUTBOUND_SYSTEMS":       "inventory",
		"INVENTORY_BASE_URL":     baseURL,
		"INVENTORY_BACKOFF_BASE": "1ms",
		"INVENTORY_BACKOFF_MAX":  "2ms",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// fastRead makes READ_TIMEOUT 100ms (the other timeouts follow the rules).
var fastRead = []string{"INVENTORY_CONNECT_TIMEOUT", "50ms", "INVENTORY_TLS_HANDSHAKE_TIMEOUT", "100ms", "INVENTORY_READ_TIMEOUT", "100ms"}

func wantOp(t *testing.T, err error, op observe.Op) {
	t.Helper()
	var e *registry.Error
	if !errors.As(err, &e) || e.Op != op {
		t.Fatalf("err = %v, want a *registry.Error at %q", err, op)
	}
}

func TestSlowHeadersTripReadTimeout(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
	reg := registrytest.New(t, env(up.URL, append(fastRead, "INVENTORY_RETRIES", "0")...), registrytest.Watch(up))
	_, _, err := get(t, reg.MustClient("inventory"), "/")
	wantOp(t, err, observe.OpReadTimeout)
}

func TestStormRetriedThrough(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Storm(2))
	reg := registrytest.New(t, env(up.URL, "INVENTORY_RETRIES", "2"), registrytest.Watch(up))
	c := reg.MustClient("inventory")
	if status, body, err := get(t, c, "/"); err != nil || status != 200 || body != "ok" {
		t.Fatalf("%d %q %v, want 200 ok after the storm", status, body, err)
	}
	if up.Requests() != 3 || c.Status().Retries != 2 {
		t.Errorf("upstream saw %d, client retried %d; want 3 and 2", up.Requests(), c.Status().Retries)
	}
}

func TestResetThroughARegistry(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reset())
	reg := registrytest.New(t, env(up.URL, "INVENTORY_RETRIES", "0"), registrytest.Watch(up))
	_, _, err := get(t, reg.MustClient("inventory"), "/")
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("err = %v, want ECONNRESET", err)
	}
	wantOp(t, err, observe.OpTransport)
}

// The registry waits as long as the upstream's Retry-After says, in
// either form (a lower bound only: the wait may be longer, never shorter).
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		first func() outboundtest.Reply // when the subtest runs: it may wait for a free CPU
		least time.Duration
	}{
		{"seconds", func() outboundtest.Reply { return outboundtest.Throttle(time.Second) }, time.Second},
		// The date has whole seconds: two from now is at least one.
		{"HTTP date", func() outboundtest.Reply { return outboundtest.ThrottleUntil(time.Now().Add(2 * time.Second)) }, 900 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := outboundtest.NewUpstream(t, outboundtest.NewScript(tt.first(), outboundtest.Healthy()))
			reg := registrytest.New(t, env(up.URL, "INVENTORY_RETRIES", "1"), registrytest.Watch(up))
			start := time.Now()
			if status, _, err := get(t, reg.MustClient("inventory"), "/"); err != nil || status != 200 {
				t.Fatalf("%d %v, want 200 after the wait", status, err)
			}
			if el := time.Since(start); el < tt.least {
				t.Errorf("answered after %v, want at least %v", el, tt.least)
			}
			if up.Requests() != 2 {
				t.Errorf("upstream saw %d requests, want 2", up.Requests())
			}
		})
	}
}

// A hang holds the bulkhead's permits: the next call is refused at once,
// and all return after the release.
func TestHangFillsTheBulkhead(t *testing.T) {
	t.Parallel()
	hang := outboundtest.NewHang(nil)
	up := outboundtest.NewUpstream(t, hang)
	reg := registrytest.New(t, env(up.URL, "INVENTORY_MAX_CONCURRENT", "2"), registrytest.Watch(up))
	c := reg.MustClient("inventory")
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if status, _, err := get(t, c, "/"); err != nil || status != 200 {
				t.Errorf("held call: %d %v, want 200 after the release", status, err)
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := hang.WaitFor(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(t, c, "/"); !errors.Is(err, bulkhead.ErrFull) {
		t.Errorf("third call: %v, want bulkhead.ErrFull", err)
	}
	if st := c.Status(); st.InFlight != 2 {
		t.Errorf("in flight %d, want 2", st.InFlight)
	}
	hang.Release()
	wg.Wait()
	if up.MaxInFlight() != 2 {
		t.Errorf("upstream max in flight %d, want 2", up.MaxInFlight())
	}
}
