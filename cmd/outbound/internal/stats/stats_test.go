package stats

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHistogramQuantilesAreWithinOneBucketAbove(t *testing.T) {
	var h hist
	if h.quantile(0.5) != 0 {
		t.Error("empty histogram has a median")
	}
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		got := h.quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.1 {
			t.Errorf("quantile(%v) = %v, want %v within 10%% above", c.q, got, c.want)
		}
	}
	h.add(0)
	h.add(time.Hour) // clamped into the last bucket
	if h.n != 102 {
		t.Errorf("n = %d, want 102", h.n)
	}
}

// upstream answers /ok 200, /missing 404 and /unimplemented 501.
func upstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			io.WriteString(w, "ok")
		case "/unimplemented":
			http.Error(w, "no", http.StatusNotImplemented)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// newRegistry builds a registry of one system "up" on srv, observed by c:
// no retries, and a breaker that opens on 3 failures of 5 and stays open.
func newRegistry(t *testing.T, srv *httptest.Server, c *Collector) *registry.Client {
	t.Helper()
	loaded, err := config.LoadEnv(map[string]string{
		"OUTBOUND_SYSTEMS": "up", "UP_BASE_URL": srv.URL, "UP_RETRIES": "0",
		"UP_BREAKER_MIN_REQUESTS": "5", "UP_BREAKER_OPEN_TIMEOUT": "1h",
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(loaded, registry.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg.MustClient("up")
}

// get calls path and records the call's latency as the demo's workers do.
func get(t *testing.T, c *registry.Client, s *System, path string) error {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	t0 := time.Now()
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	s.RecordLatency(time.Since(t0), err)
	return err
}

func TestCallsAreCountedByTheRegistrysOutcome(t *testing.T) {
	col := NewCollector(time.Now(), []string{"up"})
	c, s := newRegistry(t, upstream(t), col), col.System("up")
	for _, p := range []string{"/ok", "/missing", "/unimplemented", "/unimplemented", "/unimplemented"} {
		if err := get(t, c, s, p); err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
	}
	// Three 501s of five attempts: the breaker opens and refuses.
	if err := get(t, c, s, "/ok"); !errors.Is(err, registry.ErrCircuitOpen) {
		t.Fatalf("sixth call: %v, want the open breaker's refusal", err)
	}
	snap := s.Snapshot(false)
	if snap.Calls != 6 || snap.OK() != 2 || snap.Refused() != 1 || snap.Sent() != 5 {
		t.Errorf("calls %d, ok %d, refused %d, sent %d; want 6, 2 (200 and 404), 1, 5",
			snap.Calls, snap.OK(), snap.Refused(), snap.Sent())
	}
	if got := snap.N(observe.OutcomeFailed); got != 3 {
		t.Errorf("%d calls failed, want the three 501s (outcomes %+v)", got, snap.Outcomes)
	}
	if got := snap.N(observe.OutcomeBreakerOpen); got != 1 || got != c.Status().BreakerRefused {
		t.Errorf("%d calls breaker_open, the client's status says %d; want 1 both", got, c.Status().BreakerRefused)
	}
	for _, o := range snap.Outcomes {
		if o.Outcome == observe.OutcomeFailed && (len(o.Causes) != 1 || o.Causes[0] != Cause{"answered 501", 3}) {
			t.Errorf("causes of failed: %+v, want 3 answered 501", o.Causes)
		}
	}
	if snap.Attempts != 5 || snap.Busy != 3 || snap.Opened != 1 {
		t.Errorf("attempts %d, busy %d, opened %d; want 5 (the refusal sent none), 3, 1", snap.Attempts, snap.Busy, snap.Opened)
	}
	if snap.RefusedTimed != 1 || snap.SucceededP99 == 0 {
		t.Errorf("latencies: %d refused calls timed, answered p99 %v; want 1 and > 0", snap.RefusedTimed, snap.SucceededP99)
	}
	if ev := col.Events(0); len(ev) != 1 || ev[0].What != "up        breaker closed -> open" {
		t.Errorf("events %+v, want the one transition to open", ev)
	}
}

func TestOutcomesAreListedInTheRegistrysOrder(t *testing.T) {
	col := NewCollector(time.Now(), []string{"up"})
	for _, o := range []observe.Outcome{observe.OutcomeBreakerOpen, observe.OutcomeGaveUp, observe.OutcomeOK, observe.OutcomeGaveUp} {
		col.ObserveCall(observe.CallEvent{System: "up", Outcome: o, Op: observe.OpReadTimeout})
	}
	col.ObserveCall(observe.CallEvent{System: "other", Outcome: observe.OutcomeOK}) // not the demo's: ignored
	snap := col.System("up").Snapshot(false)
	want := []Count{
		{Outcome: observe.OutcomeOK, N: 1, Causes: []Cause{}},
		{Outcome: observe.OutcomeGaveUp, N: 2, Causes: []Cause{{"read timeout", 2}}},
		{Outcome: observe.OutcomeBreakerOpen, N: 1, Causes: []Cause{}},
	}
	if len(snap.Outcomes) != len(want) {
		t.Fatalf("outcomes %+v, want %+v", snap.Outcomes, want)
	}
	for i, c := range snap.Outcomes {
		if c.Outcome != want[i].Outcome || c.N != want[i].N || len(c.Causes) != len(want[i].Causes) ||
			len(c.Causes) > 0 && c.Causes[0] != want[i].Causes[0] {
			t.Errorf("outcome %d: %+v, want %+v", i, c, want[i])
		}
	}
}

func TestAFrozenCollectorCountsNoMoreCallsButLogsTheBreaker(t *testing.T) {
	col := NewCollector(time.Now(), []string{"up"})
	col.ObserveCall(observe.CallEvent{System: "up", Outcome: observe.OutcomeOK})
	col.Freeze()
	col.ObserveCall(observe.CallEvent{System: "up", Outcome: observe.OutcomeCanceled, Op: observe.OpCanceled})
	col.ObserveAttempt(observe.AttemptEvent{System: "up", Outcome: observe.OutcomeOK, Status: 200})
	col.ObserveBreaker("up", observe.BreakerClosed, observe.BreakerOpen)
	snap := col.System("up").Snapshot(false)
	if snap.Calls != 1 || snap.OK() != 1 || snap.Attempts != 0 {
		t.Errorf("calls %d, ok %d, attempts %d after Freeze; want the one ok call before it", snap.Calls, snap.OK(), snap.Attempts)
	}
	if len(col.Events(0)) != 1 || snap.Opened != 1 {
		t.Errorf("events %v, opened %d: the breaker's transition must still count", col.Events(0), snap.Opened)
	}
}
