package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// The drills: fault injection (OUTBOUND_FAULTS=on) on a healthy fake
// upstream, each fault kind seen by the outer stages as a real failure
// would be, and by observers as injected.

// drillObserver records every attempt event.
type drillObserver struct {
	mu       sync.Mutex
	attempts []observe.AttemptEvent
}

func (o *drillObserver) ObserveAttempt(e observe.AttemptEvent) {
	o.mu.Lock()
	o.attempts = append(o.attempts, e)
	o.mu.Unlock()
}
func (o *drillObserver) ObserveCall(observe.CallEvent)                                     {}
func (o *drillObserver) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}

// drillFigures counts the attempts: all, sent (not refused by the
// breaker), injected, and those whose error matches ErrInjected.
type drillFigures struct{ attempts, sent, injected, injectedErrs, breakerOpen int }

func (o *drillObserver) figures() drillFigures {
	o.mu.Lock()
	defer o.mu.Unlock()
	var f drillFigures
	for _, e := range o.attempts {
		f.attempts++
		if e.Outcome == observe.OutcomeBreakerOpen {
			f.breakerOpen++
			continue
		}
		f.sent++
		if e.Injected {
			f.injected++
		}
		if errors.Is(e.Err, registry.ErrInjected) {
			f.injectedErrs++
		}
	}
	return f
}

// drillEnv is a system "drill" on up with the given settings and the
// guard on.
func drillEnv(up *outboundtest.Upstream, kv ...string) map[string]string {
	env := map[string]string{
		"OUTBOUND_FAULTS":            "on",
		"OUTBOUND_SYSTEMS":           "drill",
		"DRILL_BASE_URL":             up.URL,
		"DRILL_BACKOFF_BASE":         "1ms",
		"DRILL_BACKOFF_MAX":          "5ms",
		"DRILL_RETRIES":              "2",
		"DRILL_BREAKER_OPEN_TIMEOUT": "1h",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// drillGet makes one GET and returns its status (0 on error) and error,
// the body read and closed.
func drillGet(c *registry.Client) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/item", nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestDrillAbort10Percent: 10% of attempts aborted with RETRIES=2 on a
// healthy upstream: every call still succeeds, each abort costs one
// retry, the upstream sees only the real attempts, and the attempt log
// and observers mark the aborts injected=true.
func TestDrillAbort10Percent(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	obs := &drillObserver{}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := registrytest.New(t, drillEnv(up, "DRILL_FAULT_ABORT_RATIO", "0.1"),
		registrytest.With(registry.WithFaultSeed(1), registry.WithObserver(obs), registry.WithLogger(logger)),
		registrytest.Watch(up))
	c := reg.MustClient("drill")

	const calls = 300
	for i := range calls {
		if status, err := drillGet(c); err != nil || status != http.StatusOK {
			t.Fatalf("call %d: status %d, err %v; want 200", i, status, err)
		}
	}
	st, f := c.Status(), obs.figures()
	t.Logf("10%% aborts, RETRIES=2, %d calls: %d attempts, %d injected aborts (%.1f%%), %d retries, %d reached the upstream, breaker %s",
		calls, f.attempts, st.InjectedAborts, 100*float64(st.InjectedAborts)/float64(f.attempts), st.Retries, up.Requests(), st.Breaker)

	if st.InjectedAborts < calls*5/100 || st.InjectedAborts > calls*15/100 {
		t.Errorf("injected aborts = %d of %d attempts, want about 10%%", st.InjectedAborts, f.attempts)
	}
	if st.Retries != st.InjectedAborts {
		t.Errorf("retries = %d, want one per abort (%d)", st.Retries, st.InjectedAborts)
	}
	if got := up.Requests(); got != calls || int(got) != f.attempts-int(st.InjectedAborts) {
		t.Errorf("upstream saw %d requests, want %d (the real attempts: %d attempts - %d aborts)", got, calls, f.attempts, st.InjectedAborts)
	}
	if f.injected != int(st.InjectedAborts) {
		t.Errorf("observers saw %d injected attempts, want %d", f.injected, st.InjectedAborts)
	}
	if st.Breaker != observe.BreakerClosed || st.OK != calls {
		t.Errorf("breaker %s, ok %d; want closed, %d", st.Breaker, st.OK, calls)
	}
	if st.Faults != "aborts 10% of attempts with 503" {
		t.Errorf("Status.Faults = %q", st.Faults)
	}

	// The attempt log: one record per abort with injected=true, and a
	// startup warning naming the system and its faults.
	logMu.Lock()
	defer logMu.Unlock()
	injectedLogs, warned := 0, false
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["outbound.injected"] == true {
			injectedLogs++
			if rec["http.response.status_code"] != float64(503) || rec["outbound.outcome"] != "retry" {
				t.Errorf("injected attempt logged as %v", rec)
			}
		}
		if rec["msg"] == "outbound fault injection on" && rec["level"] == "WARN" && rec["outbound.system"] == "drill" &&
			rec["outbound.faults"] == "aborts 10% of attempts with 503" {
			warned = true
		}
	}
	if injectedLogs != int(st.InjectedAborts) {
		t.Errorf("%d attempt records with injected=true, want %d", injectedLogs, st.InjectedAborts)
	}
	if !warned {
		t.Errorf("no startup warning about the fault injection in:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestDrillAbortAll: every attempt aborted. The calls get the made-up
// 503 (marked X-Outbound-Fault: abort), the breaker opens as it would on
// a real outage and refuses the rest with no I/O, the upstream sees
// nothing, and Status and the status page say both.
func TestDrillAbortAll(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	obs := &drillObserver{}
	reg := registrytest.New(t, drillEnv(up, "DRILL_FAULT_ABORT_RATIO", "1", "DRILL_BREAKER_MIN_REQUESTS", "5"),
		registrytest.With(registry.WithObserver(obs)), registrytest.Watch(up))
	c := reg.MustClient("drill")

	const calls = 10
	var aborted503, refused int
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/item", nil)
		resp, err := c.Do(req)
		switch {
		case err == nil:
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("X-Outbound-Fault") == "abort" {
				aborted503++
			} else {
				t.Errorf("call %d: status %d, header %q", i, resp.StatusCode, resp.Header.Get("X-Outbound-Fault"))
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		case errors.Is(err, registry.ErrCircuitOpen):
			refused++
		default:
			t.Errorf("call %d: %v", i, err)
		}
		cancel()
	}
	st, f := c.Status(), obs.figures()
	t.Logf("100%% aborts, RETRIES=2, BREAKER_MIN_REQUESTS=5, %d calls: %d answered 503 (injected), %d refused by the open breaker, %d attempts sent, %d injected aborts, upstream saw %d, breaker %s",
		calls, aborted503, refused, f.sent, st.InjectedAborts, up.Requests(), st.Breaker)
	if st.Breaker != observe.BreakerOpen {
		t.Errorf("breaker %s, want open", st.Breaker)
	}
	if aborted503 == 0 || refused == 0 || aborted503+refused != calls {
		t.Errorf("%d calls got the injected 503 and %d were refused, want both, %d in all", aborted503, refused, calls)
	}
	if up.Requests() != 0 {
		t.Errorf("the upstream saw %d requests, want none", up.Requests())
	}
	if f.injected != f.sent || int(st.InjectedAborts) != f.sent {
		t.Errorf("%d attempts sent, %d seen injected, %d counted aborted: want all equal", f.sent, f.injected, st.InjectedAborts)
	}

	// The status page's status.json shows the open breaker and what is
	// injected.
	rec := httptest.NewRecorder()
	statuspage.Handler(reg, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status.json", nil))
	var snap statuspage.Snapshot
	if err := json.Unmarshal(rec.Body.Bytes(), &snap); err != nil {
		t.Fatalf("status.json: %v\n%s", err, rec.Body)
	}
	if s := snap.Systems[0]; s.Breaker != observe.BreakerOpen || s.Faults != "aborts 100% of attempts with 503" || s.InjectedAborts == 0 {
		t.Errorf("status.json: breaker %s, faults %q, injected aborts %d", s.Breaker, s.Faults, s.InjectedAborts)
	}
}

// TestDrillDelayHalf: a 2s delay on 50% of attempts with READ_TIMEOUT
// 1s. A delay counts against READ_TIMEOUT (as a slow upstream's header
// wait would): each delayed attempt ends at 1s as a read timeout that
// matches ErrInjected and is retried, and never reaches the upstream.
// With the baseline breaker (0.5 of 20 attempts) the failures open it, as
// a real upstream this slow would; with the breaker out of the way the
// calls show the timeouts and retries alone.
func TestDrillDelayHalf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, minRequests string }{
		{"baseline breaker", "20"},
		{"breaker out of the way", "1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			drillDelay(t, tc.name, tc.minRequests)
		})
	}
}

func drillDelay(t *testing.T, name, minRequests string) {
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	obs := &drillObserver{}
	reg := registrytest.New(t, drillEnv(up,
		"DRILL_FAULT_DELAY", "2s", "DRILL_FAULT_DELAY_RATIO", "0.5", "DRILL_BREAKER_MIN_REQUESTS", minRequests,
		"DRILL_CONNECT_TIMEOUT", "200ms", "DRILL_TLS_HANDSHAKE_TIMEOUT", "500ms", "DRILL_READ_TIMEOUT", "1s", "DRILL_CALL_TIMEOUT", "5s"),
		registrytest.With(registry.WithFaultSeed(5), registry.WithObserver(obs)), registrytest.Watch(up))
	c := reg.MustClient("drill")

	const calls = 20
	type result struct {
		status int
		err    error
	}
	results := make(chan result, calls)
	for range calls {
		go func() {
			status, err := drillGet(c)
			results <- result{status, err}
		}()
	}
	var ok, readTimeouts, other int
	for range calls {
		r := <-results
		var e *registry.Error
		switch {
		case r.err == nil && r.status == http.StatusOK:
			ok++
		case errors.As(r.err, &e) && e.Op == observe.OpReadTimeout && errors.Is(r.err, registry.ErrInjected):
			readTimeouts++
		default:
			other++
			t.Logf("call: status %d, err %v", r.status, r.err) // retry budget or breaker: as with a real slow upstream
		}
	}
	st, f := c.Status(), obs.figures()
	t.Logf("2s delay on 50%%, READ_TIMEOUT 1s, RETRIES=2, %s, %d concurrent calls: %d ok, %d failed on an (injected) read timeout, %d otherwise; %d attempts (%d sent, %d refused by the breaker), %d injected delays, %d retries, %d retries denied by the budget, upstream saw %d, breaker %s",
		name, calls, ok, readTimeouts, other, f.attempts, f.sent, f.breakerOpen, st.InjectedDelays, st.Retries, st.RetriesThrottled, up.Requests(), st.Breaker)

	if st.InjectedDelays == 0 || ok == 0 {
		t.Fatalf("%d delays, %d calls ok: the drill did not run", st.InjectedDelays, ok)
	}
	// Every delayed attempt ended as an injected read timeout; every
	// other sent attempt reached the upstream.
	if f.injectedErrs != int(st.InjectedDelays) || f.injected != int(st.InjectedDelays) {
		t.Errorf("%d injected read timeouts, %d injected attempts, want %d (the delays)", f.injectedErrs, f.injected, st.InjectedDelays)
	}
	if got, want := up.Requests(), int64(f.sent)-int64(st.InjectedDelays); got != want {
		t.Errorf("upstream saw %d requests, want %d (sent attempts - delayed ones)", got, want)
	}
	if int(st.Retries) != f.attempts-calls {
		t.Errorf("retries = %d, want attempts - calls = %d", st.Retries, f.attempts-calls)
	}
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFaultDelayCountsAgainstReadTimeout pins the decision on synctest's
// fake clock, with a transport that answers at once: an injected delay
// stands for a slow upstream, so it counts against READ_TIMEOUT (a delay
// that reaches it ends the attempt there, as a read timeout, without
// sending it) and against the call's deadline; a shorter delay holds the
// attempt that long, then sends it.
func TestFaultDelayCountsAgainstReadTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		delay     string
		budget    time.Duration // the caller's deadline; 0: none
		wantAfter time.Duration // when the attempt ended or was sent
		wantOp    observe.Op    // "": sent, 200
		wantSent  bool
	}{
		{name: "longer than READ_TIMEOUT", delay: "2s", wantAfter: time.Second, wantOp: observe.OpReadTimeout},
		{name: "shorter than READ_TIMEOUT", delay: "500ms", wantAfter: 500 * time.Millisecond, wantSent: true},
		{name: "cut by the caller's budget", delay: "2s", budget: 700 * time.Millisecond,
			wantAfter: 600 * time.Millisecond, wantOp: observe.OpBudgetTimeout}, // 100ms reserve
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sent := time.Duration(-1)
				start := time.Now()
				ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					sent = time.Since(start)
					return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
				})
				loaded, err := config.LoadEnv(map[string]string{
					"OUTBOUND_FAULTS": "on", "D_BASE_URL": "http://d.internal", "D_RETRIES": "0",
					"D_CONNECT_TIMEOUT": "100ms", "D_TLS_HANDSHAKE_TIMEOUT": "100ms", "D_READ_TIMEOUT": "1s",
					"D_FAULT_DELAY": tc.delay, "D_FAULT_DELAY_RATIO": "1",
				}, config.System{Name: "d"})
				if err != nil {
					t.Fatal(err)
				}
				obs := &drillObserver{}
				reg, err := registry.New(loaded, registry.WithObserver(obs),
					registry.WithTransportWrapper(func(string, http.RoundTripper) http.RoundTripper { return ok }))
				if err != nil {
					t.Fatal(err)
				}
				defer reg.Close()
				ctx := context.Background()
				if tc.budget > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.budget)
					defer cancel()
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/x", nil)
				resp, err := reg.MustClient("d").Do(req)
				took := time.Since(start)
				if tc.wantSent {
					if err != nil || sent != tc.wantAfter {
						t.Fatalf("err %v, sent after %v; want sent after %v", err, sent, tc.wantAfter)
					}
					resp.Body.Close()
				} else {
					var e *registry.Error
					if !errors.As(err, &e) || e.Op != tc.wantOp || !errors.Is(err, registry.ErrInjected) || took != tc.wantAfter || sent >= 0 {
						t.Fatalf("err %v after %v (sent: %v); want an injected %s after %v, nothing sent", err, took, sent >= 0, tc.wantOp, tc.wantAfter)
					}
				}
				if f := obs.figures(); f.injected != 1 {
					t.Errorf("observers saw %d injected attempts, want 1", f.injected)
				}
			})
		})
	}
}

// closeTracker is a request body that records its Close.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

// TestFaultAbortClosesTheBody: an aborted attempt closes the request's
// body, as a transport would, so that a caller streaming it is not left
// blocked; the upstream sees nothing.
func TestFaultAbortClosesTheBody(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	reg := registrytest.New(t, drillEnv(up, "DRILL_FAULT_ABORT_RATIO", "1"), registrytest.Watch(up))
	body := &closeTracker{Reader: strings.NewReader("payload")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/pay", body)
	resp, err := reg.MustClient("drill").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !body.closed.Load() || up.Requests() != 0 {
		t.Errorf("status %d, body closed %v, upstream saw %d; want 503, true, 0", resp.StatusCode, body.closed.Load(), up.Requests())
	}
}
