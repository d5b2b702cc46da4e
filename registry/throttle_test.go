package registry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// The retry throttle: a token bucket that caps retries at
// RETRY_BUDGET_RATIO of recent calls plus RETRY_BUDGET_MIN_PER_SEC, so a
// 100% outage costs the upstream about 1.2x the calls, not 1 + RETRIES
// times.

// throttleEnv are the settings of the throttle tests: 3 retries, the
// baseline throttle (ratio 0.2, floor 10/s), a backoff of a few
// milliseconds and a breaker that never opens, so the throttle alone
// limits the retries.
var throttleEnv = map[string]string{
	"RETRIES":                  "3",
	"RETRY_BUDGET_RATIO":       "0.2",
	"RETRY_BUDGET_MIN_PER_SEC": "10",
	"BACKOFF_BASE":             "1ms",
	"BACKOFF_MAX":              "5ms",
	"BREAKER_MIN_REQUESTS":     "100000",
	"MAX_CONCURRENT":           "32",
}

// throttleClient builds system "throttled" against baseURL with throttleEnv.
func throttleClient(t *testing.T, baseURL string) *Client {
	t.Helper()
	env := map[string]string{"BASE_URL": baseURL}
	for k, v := range throttleEnv {
		env[k] = v
	}
	return loadRegistry(t, systemsEnv(map[string]map[string]string{"throttled": env})).MustClient("throttled")
}

// throttleRun makes n GET calls with workers in flight and returns the
// status of each call (0 for an error) and how long it took.
func throttleRun(t *testing.T, c *Client, n, workers int) (map[int]int, time.Duration) {
	t.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	statuses := map[int]int{}
	var firstErr error
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("/call/%d", i), nil)
				status := 0
				resp, err := c.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				cancel()
				mu.Lock()
				statuses[status]++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Errorf("calls failed with an error (want responses): first: %v", firstErr)
	}
	return statuses, time.Since(start)
}

// 1,000 calls at 20 in flight to an upstream that answers 503 to
// everything, with 3 retries each. Without a throttle the upstream would
// see 4,000 requests; with it, at most calls*(1+ratio) + floor*elapsed +
// bucket.
func TestRetryThrottleCapsAStorm(t *testing.T) {
	t.Parallel()
	const calls, workers = 1000, 20
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	c := throttleClient(t, srv.URL)
	statuses, elapsed := throttleRun(t, c, calls, workers)
	if statuses[http.StatusServiceUnavailable] != calls {
		t.Fatalf("statuses %v, want %d x 503 (the last response comes back)", statuses, calls)
	}

	st := c.Status()
	seen := srv.Requests()
	ratio, floor := 0.2, 10.0
	bucket := max(20, 2*floor)
	bound := float64(calls)*(1+ratio) + floor*elapsed.Seconds() + bucket
	t.Logf("storm: %d calls in %v: upstream saw %d requests (%d retries, %d denied by the throttle); "+
		"bound = %d*(1+%.1f) + %.0f/s*%.2fs + %.0f = %.1f; without a throttle: %d",
		calls, elapsed.Round(time.Millisecond), seen, st.Retries, st.RetriesThrottled,
		calls, ratio, floor, elapsed.Seconds(), bucket, bound, calls*4)
	if float64(seen) > bound {
		t.Errorf("upstream saw %d requests, more than the throttle's bound %.1f", seen, bound)
	}
	if seen != int64(calls)+int64(st.Retries) {
		t.Errorf("upstream saw %d requests, want calls + Status().Retries = %d", seen, calls+int(st.Retries))
	}
	// The throttle is spent, not idle: every retry it allowed was taken.
	if min := float64(calls) * ratio; float64(st.Retries) < min {
		t.Errorf("only %d retries, want at least calls*ratio = %.0f", st.Retries, min)
	}
	if st.RetriesThrottled == 0 {
		t.Error("Status().RetriesThrottled = 0 under a 100% outage")
	}
	if st.Breaker != observe.BreakerClosed {
		t.Errorf("breaker %v, want closed (BREAKER_MIN_REQUESTS=100000)", st.Breaker)
	}
}

// An upstream that fails one request in 20 gets every retry it needs: the
// throttle never denies one.
func TestRetryThrottleNeverDeniesAHealthyUpstream(t *testing.T) {
	t.Parallel()
	const calls, workers = 1000, 20
	// Every 20th call fails its first attempt only, so every call ends
	// 200 whatever the interleaving (a shared counter could hand one call
	// a failing slot on every attempt).
	var seen sync.Map
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id int
		_, _ = fmt.Sscanf(r.URL.Path, "/call/%d", &id)
		if _, again := seen.LoadOrStore(r.URL.Path, true); !again && id%20 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	c := throttleClient(t, srv.URL)
	statuses, elapsed := throttleRun(t, c, calls, workers)
	st := c.Status()
	t.Logf("1 in 20 failing: %d calls in %v: statuses %v, upstream saw %d requests, %d retries, %d denied",
		calls, elapsed.Round(time.Millisecond), statuses, srv.Requests(), st.Retries, st.RetriesThrottled)
	if st.RetriesThrottled != 0 {
		t.Errorf("Status().RetriesThrottled = %d, want 0", st.RetriesThrottled)
	}
	if statuses[http.StatusOK] != calls {
		t.Errorf("statuses %v, want %d x 200", statuses, calls)
	}
	if st.Retries < 40 {
		t.Errorf("%d retries, want about 50 (one request in 20 fails)", st.Retries)
	}
}
