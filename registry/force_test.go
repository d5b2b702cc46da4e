package registry

import (
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// TestForceOpenRefusesEveryCallAndSaysWhy checks that a breaker forced
// open refuses every call with no I/O, with a refusal of its own
// (forced-open, still matching ErrCircuitOpen), shows it in Status, and
// serves again once released.
func TestForceOpenRefusesEveryCallAndSaysWhy(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	c := rateClient(t, up.URL, nil)
	if err := c.Force(observe.BreakerOpen, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err := rateGet(t, c.Do)
	var e *Error
	if !errors.Is(err, ErrCircuitOpen) || !errors.As(err, &e) || e.Op != observe.OpForcedOpen {
		t.Fatalf("forced open: %v, want an *Error of op forced open matching ErrCircuitOpen", err)
	}
	resp, err := rateGet(t, c.HTTPClient().Do)
	if err != nil || resp.Header.Get(RefusedHeader) != "forced-open" || !errors.Is(Refusal(resp.Header), ErrCircuitOpen) {
		t.Fatalf("HTTPClient forced open: %v %v, want the refusal forced-open", resp, err)
	}
	st := c.Status()
	if st.Forced == nil || st.Forced.State != observe.BreakerOpen || st.Breaker != observe.BreakerOpen ||
		st.Forced.Until.Before(time.Now().Add(59*time.Minute)) {
		t.Errorf("Status: breaker %s, forced %+v; want open, forced open for an hour", st.Breaker, st.Forced)
	}
	if up.Requests() != 0 {
		t.Errorf("the upstream got %d requests while forced open", up.Requests())
	}
	if err := c.Force("", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := rateGet(t, c.Do); err != nil || up.Requests() != 1 {
		t.Errorf("released: %v, %d requests; want served", err, up.Requests())
	}
	if st := c.Status(); st.Forced != nil || st.Breaker != observe.BreakerClosed {
		t.Errorf("released: Status breaker %s forced %+v", st.Breaker, st.Forced)
	}
}

// TestForceClosedLetsCallsThroughAnOpenBreaker checks that a breaker
// forced closed lets calls through whatever the evidence.
func TestForceClosedLetsCallsThroughAnOpenBreaker(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	c := rateClient(t, up.URL, map[string]string{"BREAKER_MIN_REQUESTS": "2", "RETRIES": "0", "BREAKER_OPEN_TIMEOUT": "1h"})
	for range 2 {
		_, _ = rateGet(t, c.Do)
	}
	if _, err := rateGet(t, c.Do); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after the storm: %v, want the breaker open", err)
	}
	if err := c.Force(observe.BreakerClosed, time.Hour); err != nil {
		t.Fatal(err)
	}
	before := up.Requests()
	for i := range 3 {
		if resp, err := rateGet(t, c.Do); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("forced closed, call %d: %v %v, want the upstream's 503", i, resp, err)
		}
	}
	if got := up.Requests() - before; got != 3 {
		t.Errorf("forced closed: %d requests reached the upstream, want 3", got)
	}
	if st := c.Status(); st.Breaker != observe.BreakerClosed || st.Forced == nil {
		t.Errorf("Status: breaker %s forced %+v, want closed by force", st.Breaker, st.Forced)
	}
}

// TestForceEndsByItself checks that an override not renewed ends once
// its time has passed, and that Force refuses what is not an override.
func TestForceEndsByItself(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	c := rateClient(t, up.URL, nil)
	if err := c.Force(observe.BreakerOpen, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Status().Forced != nil {
		if time.Now().After(deadline) {
			t.Fatal("the override still holds 5s after its 50ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := rateGet(t, c.Do); err != nil {
		t.Errorf("after the override ended: %v", err)
	}
	for _, bad := range []struct {
		s observe.BreakerState
		d time.Duration
	}{{observe.BreakerHalfOpen, time.Minute}, {observe.BreakerOpen, 0}, {observe.BreakerOpen, 25 * time.Hour}, {"shut", time.Minute}} {
		if err := c.Force(bad.s, bad.d); err == nil {
			t.Errorf("Force(%q, %v) accepted", bad.s, bad.d)
		}
	}
}

// TestForcedOpenRetryAfterIsTheOverridesTimeLeft checks that
// HTTPClient's refusal of a call refused by a forced open says, in
// Retry-After, when the operator's override ends (its time left, rounded
// up to whole seconds), not the system's BREAKER_OPEN_TIMEOUT; on
// synctest's clock, with no I/O (a forced open sends nothing).
func TestForcedOpenRetryAfterIsTheOverridesTimeLeft(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := rateClient(t, "http://127.0.0.1:1", map[string]string{"BREAKER_OPEN_TIMEOUT": "15s"})
		if err := c.Force(observe.BreakerOpen, time.Minute); err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			sleep time.Duration
			want  string
		}{{0, "60"}, {500 * time.Millisecond, "60"}, {20 * time.Second, "40"}, {39 * time.Second, "1"}} {
			time.Sleep(step.sleep)
			resp, err := rateGet(t, c.HTTPClient().Do)
			if err != nil || resp.Header.Get(RefusedHeader) != "forced-open" {
				t.Fatalf("forced open: %v %v, want the refusal forced-open", resp, err)
			}
			if got := resp.Header.Get("Retry-After"); got != step.want {
				t.Errorf("Retry-After %q with %v of the override left, want %q", got, time.Until(c.Status().Forced.Until), step.want)
			}
		}
	})
}
