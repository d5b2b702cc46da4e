package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// rateClient builds system "rl" against baseURL with env laid over a
// breaker that never opens and fast retries.
func rateClient(t *testing.T, baseURL string, env map[string]string, opts ...Option) *Client {
	t.Helper()
	all := map[string]string{
		"OUTBOUND_SYSTEMS": "rl", "RL_BASE_URL": baseURL, "RL_BREAKER_MIN_REQUESTS": "100000",
		"RL_BACKOFF_BASE": "1ms", "RL_BACKOFF_MAX": "1ms",
	}
	for k, v := range env {
		all["RL_"+k] = v
	}
	loaded, err := config.LoadEnv(all)
	if err != nil {
		t.Fatalf("LoadEnv: %v", err)
	}
	r, err := New(loaded, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r.MustClient("rl")
}

// rateGet sends GET / through send under a 5s budget and closes the body.
func rateGet(t *testing.T, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	resp, err := send(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

// rateEvents records call outcomes and pauses.
type rateEvents struct {
	mu     sync.Mutex
	calls  []observe.Outcome
	pauses []time.Time
}

func (o *rateEvents) ObserveAttempt(observe.AttemptEvent) {}
func (o *rateEvents) ObserveCall(e observe.CallEvent) {
	o.mu.Lock()
	o.calls = append(o.calls, e.Outcome)
	o.mu.Unlock()
}
func (o *rateEvents) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}
func (o *rateEvents) ObservePause(_ string, until time.Time, _ int) {
	o.mu.Lock()
	o.pauses = append(o.pauses, until)
	o.mu.Unlock()
}

// TestRateLimitRefusesWithoutIO checks that past its burst a system at
// RATE_LIMIT with no wait allowed refuses at once, sends nothing, counts
// nothing against the breaker, says so through Do (ErrRateLimited) and
// HTTPClient (a refusal SDKs do not retry), and shows it in Status.
func TestRateLimitRefusesWithoutIO(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	obs := &rateEvents{}
	c := rateClient(t, up.URL, map[string]string{"RATE_LIMIT": "1/h", "RATE_BURST": "2"}, WithObserver(obs))
	for i := range 2 {
		if _, err := rateGet(t, c.Do); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	_, err := rateGet(t, c.Do)
	var e *Error
	if !errors.Is(err, ErrRateLimited) || !errors.As(err, &e) || e.Op != observe.OpRateLimit || e.Attempts != 0 {
		t.Fatalf("past the burst: %v, want an *Error of op rate limit, no attempt, matching ErrRateLimited", err)
	}
	resp, err := rateGet(t, c.HTTPClient().Do)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(RefusedHeader) != "rate-limited" ||
		resp.Header.Get("Retry-After") != "1" || !errors.Is(Refusal(resp.Header), ErrRateLimited) {
		t.Fatalf("HTTPClient past the burst: %v %v, want the refusal 503 rate-limited", resp, err)
	}
	if up.Requests() != 2 {
		t.Errorf("the upstream got %d requests, want the 2 of the burst", up.Requests())
	}
	st := c.Status()
	if st.Rate == nil || st.Rate.Limit != "1/h" || st.Rate.Scope != "local" || st.Rate.Refused != 2 || st.Rate.Tokens >= 1 {
		t.Errorf("Status().Rate = %+v, want 1/h local, 2 refused, no token left", st.Rate)
	}
	if n := st.BreakerCounts; n.Successes != 2 || n.Failures != 0 || n.Exclusions != 2 {
		t.Errorf("breaker counts %+v, want 2 successes and the 2 refusals excluded", n)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.calls) != 4 || obs.calls[2] != observe.OutcomeRateLimited || obs.calls[3] != observe.OutcomeRateLimited {
		t.Errorf("call outcomes %v, want ok ok rate_limited rate_limited", obs.calls)
	}
}

// TestEveryRequestThatLeavesTakesAToken checks that retries pay too: with
// two tokens, a call against a failing upstream sends its first attempt
// and one retry, and its second retry is refused.
func TestEveryRequestThatLeavesTakesAToken(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	c := rateClient(t, up.URL, map[string]string{"RATE_LIMIT": "1/h", "RATE_BURST": "2", "RETRIES": "2"})
	_, err := rateGet(t, c.Do)
	var e *Error
	if !errors.Is(err, ErrRateLimited) || !errors.As(err, &e) || e.Attempts != 2 || !strings.Contains(err.Error(), "status 503") {
		t.Fatalf("%v, want the third attempt refused by the rate limit after 2 attempts, naming the last failure", err)
	}
	if up.Requests() != 2 {
		t.Errorf("the upstream got %d requests, want 2", up.Requests())
	}
	// The call sent two attempts: it gave up on their status, it was not
	// refused.
	if e.Op != observe.OpStatus || e.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("Error{Op %q, StatusCode %d}, want the last attempt's status 503", e.Op, e.StatusCode)
	}
	if st := c.Status(); st.Sent != 1 || st.Outcomes["gave_up"] != 1 || st.Outcomes["rate_limited"] != 0 {
		t.Errorf("Status: sent %d, outcomes %v; want the call counted as sent and given up", st.Sent, st.Outcomes)
	}
}

// TestRateMaxWaitHoldsRequestsForTheirToken checks that with a wait
// allowed, requests past the burst wait for their token instead of being
// refused.
func TestRateMaxWaitHoldsRequestsForTheirToken(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	c := rateClient(t, up.URL, map[string]string{"RATE_LIMIT": "50/s", "RATE_BURST": "1", "RATE_MAX_WAIT": "2s"})
	for i := range 5 {
		if _, err := rateGet(t, c.Do); err != nil {
			t.Fatalf("call %d: %v, want it to wait for its token", i, err)
		}
	}
	if st := c.Status(); st.Rate.Refused != 0 || up.Requests() != 5 {
		t.Errorf("refused %d, upstream %d; want 0 and 5", st.Rate.Refused, up.Requests())
	}
}

// TestTooManyRequestsPausesTheSystem checks that a 429 with Retry-After
// pauses the system: the calls after it are refused with no I/O until
// the pause ends, Status says until when, and the observers are told of
// the pause once.
func TestTooManyRequestsPausesTheSystem(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.NewScript(
		outboundtest.Reply{Status: http.StatusTooManyRequests, Header: outboundtest.RetryAfterSeconds(30)},
		outboundtest.Reply{Status: http.StatusTooManyRequests, Header: outboundtest.RetryAfterSeconds(30)},
		outboundtest.Healthy()))
	obs := &rateEvents{}
	c := rateClient(t, up.URL, map[string]string{"RATE_LIMIT": "1000/s", "RETRIES": "0"}, WithObserver(obs))
	start := time.Now()
	if resp, err := rateGet(t, c.Do); err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first call: %v %v, want the 429", resp, err)
	}
	for i := range 3 {
		if _, err := rateGet(t, c.Do); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("call %d during the pause: %v, want ErrRateLimited", i, err)
		}
	}
	if up.Requests() != 1 {
		t.Errorf("the upstream got %d requests during the pause, want the first alone", up.Requests())
	}
	// Retry-After says 30s; CALL_TIMEOUT (15s) bounds it.
	until := c.Status().Rate.PausedUntil
	if until.Before(start.Add(14*time.Second)) || until.After(time.Now().Add(15*time.Second)) {
		t.Errorf("paused until %v from the 429, want 30s bounded by CALL_TIMEOUT 15s", until.Sub(start))
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.pauses) != 1 {
		t.Errorf("%d pauses told, want 1", len(obs.pauses))
	}
}

// TestOnlyBaseURLsOriginPausesTheSystem checks that a 503 with
// Retry-After from a host a redirect led to (FOLLOW_REDIRECTS=any) is
// that host's answer, not the system's: the caller gets it, nothing is
// paused, and the next call is sent. The same answer from BASE_URL's own
// origin pauses the system.
func TestOnlyBaseURLsOriginPausesTheSystem(t *testing.T) {
	busy := outboundtest.Reply{Status: http.StatusServiceUnavailable, Header: outboundtest.RetryAfterSeconds(300)}
	other := outboundtest.NewUpstream(t, busy)
	mux := http.NewServeMux()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other.URL+"/busy", http.StatusFound) })
	mux.Handle("/busy", busy)
	mux.Handle("/", outboundtest.Healthy())
	base := outboundtest.NewUpstream(t, mux)
	obs := &rateEvents{}
	c := rateClient(t, base.URL, map[string]string{"RATE_LIMIT": "1000/s", "RETRIES": "0", "FOLLOW_REDIRECTS": "any"}, WithObserver(obs))

	ctx := tbrCtx(t, 10*time.Second)
	get := func(send func(*http.Request) (*http.Response, error), path string) (int, error) {
		t.Helper()
		status, _, _, err := sendRead(ctx, t, send, http.MethodGet, path, nil)
		return status, err
	}
	for _, send := range []func(*http.Request) (*http.Response, error){c.Do, c.HTTPClient().Do} {
		if status, err := get(send, "/away"); err != nil || status != http.StatusServiceUnavailable {
			t.Fatalf("redirected to the other host: %d %v, want its 503", status, err)
		}
		if until := c.Status().Rate.PausedUntil; !until.IsZero() {
			t.Fatalf("paused until %v by another host's Retry-After, want no pause", until)
		}
		sent := base.Requests()
		if status, err := get(send, "/"); err != nil || status != http.StatusOK || base.Requests() != sent+1 {
			t.Fatalf("the call after the other host's 503: %d %v (BASE_URL got %d more), want it sent and answered 200",
				status, err, base.Requests()-sent)
		}
	}
	if other.Requests() != 2 {
		t.Errorf("the other host got %d requests, want 2", other.Requests())
	}
	obs.mu.Lock()
	if len(obs.pauses) != 0 {
		t.Errorf("%d pauses told, want none", len(obs.pauses))
	}
	obs.mu.Unlock()

	if status, err := get(c.Do, "/busy"); err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("BASE_URL's own 503: %d %v", status, err)
	}
	if c.Status().Rate.PausedUntil.IsZero() {
		t.Errorf("BASE_URL's own 503 with Retry-After did not pause the system")
	}
	sent := base.Requests()
	if _, err := get(c.Do, "/"); !errors.Is(err, ErrRateLimited) || base.Requests() != sent {
		t.Errorf("the call during BASE_URL's pause: %v (sent %d), want ErrRateLimited and nothing sent", err, base.Requests()-sent)
	}
}
