package statuspage_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// This file checks what status.json says of a system in trouble: the
// failure that opened its breaker, the calls it refuses, the time left
// until it changes, and the calls whose budget ran out.

// observed builds a registry of env watched by a new Recorder.
func observed(t *testing.T, env map[string]string) (*registry.Registry, *statuspage.Recorder) {
	t.Helper()
	rec := statuspage.NewRecorder()
	return registrytest.New(t, env, registrytest.With(registry.WithObserver(rec))), rec
}

// snapshot serves status.json of r and rec and decodes it.
func snapshot(t *testing.T, r *registry.Registry, rec *statuspage.Recorder) statuspage.Snapshot {
	t.Helper()
	var snap statuspage.Snapshot
	if err := json.Unmarshal(serve(t, statuspage.Handler(r, rec), "GET", "/status.json").Body.Bytes(), &snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestStatusJSONShowsTheFailureThatOpenedTheBreaker opens a breaker with
// one failed attempt whose retry the breaker then refuses, and checks
// that status.json counts that call as one that sent a request and gave
// up (not as a refusal), counts the later calls as refused, and shows the
// failure (a 503, a read timeout) while the breaker refuses, not the
// refusal and not nothing.
func TestStatusJSONShowsTheFailureThatOpenedTheBreaker(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	for _, tc := range []struct{ name, path, want string }{
		{"503", "/down", "GET attempt 1 answered 503 Service Unavailable"},
		{"read timeout", "/hang", "GET attempt 1: read timeout: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, rec := observed(t, map[string]string{
				"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": up.URL, "INV_RETRIES": "2", "INV_BACKOFF_BASE": "1ms", "INV_BACKOFF_MAX": "2ms",
				"INV_BREAKER_MIN_REQUESTS": "1", "INV_BREAKER_OPEN_TIMEOUT": "1h",
				"INV_CONNECT_TIMEOUT": "100ms", "INV_TLS_HANDSHAKE_TIMEOUT": "100ms", "INV_READ_TIMEOUT": "200ms",
			})
			inv := r.MustClient("inv")
			call(t, inv, tc.path) // the attempt opens the breaker, which refuses its retry
			for range 5 {
				call(t, inv, tc.path) // refused
			}
			s := snapshot(t, r, rec).Systems[0]
			if s.Breaker != observe.BreakerOpen || s.BreakerRefused != 5 || up.Requests() == 0 {
				t.Fatalf("breaker %s, %d refused: want open, every call after the first refused", s.Breaker, s.BreakerRefused)
			}
			if s.Sent != 1 || s.GaveUp != 1 || s.Outcomes["gave_up"] != 1 || s.Outcomes["breaker_open"] != 5 {
				t.Errorf("sent %d, gave up %d, outcomes %v: want the first call sent and given up, 5 refused", s.Sent, s.GaveUp, s.Outcomes)
			}
			if s.LastError == nil || s.LastError.Outcome != "gave_up" {
				t.Errorf("last error %+v, want the failure of the call that sent a request", s.LastError)
			}
			if s.OpenedBy == nil || !strings.HasPrefix(s.OpenedBy.Message, tc.want) || strings.Contains(s.OpenedBy.Message, "breaker open") {
				t.Errorf("opened by %+v, want %q", s.OpenedBy, tc.want)
			}
		})
	}
}

// TestStatusJSONCountsRefusedCallsInTheRate refuses 100 calls a second
// for 3 seconds with a breaker forced open for an hour, on synctest's
// clock, and checks the rate and the time left until the override ends.
func TestStatusJSONCountsRefusedCallsInTheRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r, rec := observed(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": "http://127.0.0.1:1"})
		inv := r.MustClient("inv")
		if err := inv.Force(observe.BreakerOpen, time.Hour); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			for range 100 {
				call(t, inv, "/x")
			}
			time.Sleep(time.Second)
		}
		s := snapshot(t, r, rec).Systems[0]
		if s.BreakerRefused != 300 {
			t.Fatalf("%d refused, want 300", s.BreakerRefused)
		}
		if s.CallRate == nil || s.CallRate.Calls != 100 || s.CallRate.Refused != 100 {
			t.Errorf("call rate %+v, want 100 calls/s, all refused", s.CallRate)
		}
		if n := s.NextChange; n == nil || n.To != statuspage.Released || n.InMS != (time.Hour-3*time.Second).Milliseconds() {
			t.Errorf("next change %+v, want the override's end in 59m57s", n)
		}
		// The refusals stop: 5 s later the system is idle.
		time.Sleep(statuspage.RateWindow)
		if s := snapshot(t, r, rec).Systems[0]; s.CallRate == nil || s.CallRate.Calls != 0 {
			t.Errorf("call rate %+v %s after the last call, want 0", s.CallRate, statuspage.RateWindow)
		}
	})
}

// TestStatusJSONSaysWhenAnOpenBreakerTurnsHalfOpen checks the time left
// until an open breaker lets probes through: BREAKER_OPEN_TIMEOUT after
// it opened.
func TestStatusJSONSaysWhenAnOpenBreakerTurnsHalfOpen(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	r, rec := observed(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": up.URL, "INV_RETRIES": "0",
		"INV_BREAKER_MIN_REQUESTS": "1", "INV_BREAKER_OPEN_TIMEOUT": "10m"})
	call(t, r.MustClient("inv"), "/x")
	snap := snapshot(t, r, rec)
	s := snap.Systems[0]
	if s.Breaker != observe.BreakerOpen || s.BreakerChangedAt == nil || s.HalfOpenAt == nil {
		t.Fatalf("breaker %s changed %v half-open %v: want open with both times", s.Breaker, s.BreakerChangedAt, s.HalfOpenAt)
	}
	left := s.HalfOpenAt.Sub(snap.GeneratedAt)
	if n := s.NextChange; n == nil || n.To != "half-open" || !n.At.Equal(*s.HalfOpenAt) ||
		n.InMS != int64((left+time.Millisecond-1)/time.Millisecond) || left <= 0 || left > 10*time.Minute {
		t.Errorf("next change %+v, half-open at %v (%v from the snapshot): want half-open then", n, s.HalfOpenAt, left)
	}
}

// TestStatusJSONCountsTheCallsWhoseBudgetRanOut checks that of the calls
// the caller's budget capped, those it ended are counted apart: a capped
// call is usual, one that ran out of budget is not.
func TestStatusJSONCountsTheCallsWhoseBudgetRanOut(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	r, rec := observed(t, map[string]string{"OUTBOUND_SYSTEMS": "pay", "PAY_BASE_URL": up.URL})
	pay := r.MustClient("pay")
	for _, path := range []string{"/ok", "/hang"} {
		// A budget of 1 s (less the 100 ms reserve), under CALL_TIMEOUT.
		ctx, cancel := context.WithTimeout(context.Background(), 1100*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		if resp, err := pay.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		cancel()
	}
	call(t, pay, "/ok") // no deadline: not capped
	s := snapshot(t, r, rec).Systems[0]
	if s.Calls != 3 || s.BudgetCapped != 2 || s.BudgetTimeouts != 1 {
		t.Errorf("calls %d, budget capped %d, ran out %d: want 3, 2, 1", s.Calls, s.BudgetCapped, s.BudgetTimeouts)
	}
}
