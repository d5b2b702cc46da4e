package registry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// Hedged requests: a copy of a replayable attempt goes out once the first
// has waited HEDGE_DELAY; the first answer the caller should see wins.

// hgClient builds system "hg" against baseURL: a breaker that never
// opens, no retries, and env laid over that.
func hgClient(t *testing.T, baseURL string, env map[string]string, opts ...Option) *Client {
	t.Helper()
	all := map[string]string{
		"OUTBOUND_SYSTEMS":        "hg",
		"HG_BASE_URL":             baseURL,
		"HG_RETRIES":              "0",
		"HG_MAX_CONCURRENT":       "64",
		"HG_BREAKER_MIN_REQUESTS": "100000",
	}
	for k, v := range env {
		all["HG_"+k] = v
	}
	return loadRegistry(t, all, opts...).MustClient("hg")
}

// hgTail answers every every-th request (counted on arrival, so the test
// does not depend on chance) after slow, the others after fast; a request
// cancelled while it waits ends at once.
func hgTail(every int64, fast, slow time.Duration) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := fast
		if n.Add(1)%every == 0 {
			d = slow
		}
		if !outboundtest.Wait(r, d) {
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

// hgFirstSlow holds the first request for a path /tail/i with i a
// multiple of every until it is cancelled; its copies, and every other
// request, are answered at once: one slow replica, deterministically.
func hgFirstSlow(every int) http.Handler {
	var seen sync.Map
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/tail/"))
		if _, again := seen.LoadOrStore(i, true); !again && i%every == 0 {
			outboundtest.Wait(r, time.Minute)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

// hgStats are the figures of one run.
type hgStats struct {
	p50, p99 time.Duration
	calls    int
	extra    int64 // upstream requests beyond one per call
	st       observe.Status
}

func (s hgStats) String() string {
	return fmt.Sprintf("p50 %v, p99 %v, extra requests %d (%.1f%%), hedges sent %d, won %d",
		s.p50.Round(100*time.Microsecond), s.p99.Round(100*time.Microsecond), s.extra,
		100*float64(s.extra)/float64(s.calls), s.st.HedgesSent, s.st.HedgesWon)
}

// hgRun makes n GET calls with workers in flight, each read and closed,
// and returns the latency percentiles and the upstream's extra requests.
func hgRun(t *testing.T, c *Client, up *outboundtest.Upstream, n, workers int) hgStats {
	t.Helper()
	before := up.Requests()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/tail/"+strconv.FormatInt(i, 10), nil)
				t0 := time.Now()
				resp, err := c.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					lat[i-1] = time.Since(t0)
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprint(err))
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Errorf("%d calls failed, want every call answered 200; first: %v", f, firstErr.Load())
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(n))-1] }
	return hgStats{p50: pct(0.50), p99: pct(0.99), calls: n, extra: up.Requests() - before - int64(n), st: c.Status()}
}

// 5% of responses take 500ms, the rest 5ms. Without hedging the p99 is
// the slow path; with a fixed 20ms hedge and with a p95 hedge it comes
// down to about the delay plus the fast path (the log gives the figures;
// the bounds only check that the slow path left the p99), for at most
// 10% more upstream requests. It measures latency, so it runs alone: not
// in parallel with the package's other tests, its cases one after the
// other.
func TestHedgeCutsTheTailLatency(t *testing.T) {
	const calls, workers = 2000, 20
	const fast, slow = 5 * time.Millisecond, 500 * time.Millisecond
	cases := []struct {
		name, delay string
		bound       time.Duration // the p99 must be below
		extra       int           // percent of calls the extra requests may reach
	}{
		{"off", "0", 0, 0},
		// The bounds leave room for a loaded machine (-race, the suite's
		// other packages): the figures in the log are the measurement;
		// the test fails when the slow path is still in the p99. A p95
		// delay follows the measured fast path, which a loaded machine
		// slows down.
		// A p95 of the answers hedges about 5% of the fast calls besides
		// the 5% slow ones: about 10% by construction (docs/hedging.md).
		// A fixed 20ms hedges the 5% slow calls plus every fast call a
		// loaded machine delays past 20ms: 5-6% on a quiet machine (and
		// 5.0% in `go run ./bench -hedge`, against a target of 10%), 10.6%
		// once beside benchmarks; the bound leaves room for that.
		{"fixed 20ms", "20ms", 200 * time.Millisecond, 15},
		{"p95", "p95", 400 * time.Millisecond, 12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := outboundtest.NewUpstream(t, hgTail(20, fast, slow))
			c := hgClient(t, up.URL, map[string]string{"HEDGE_DELAY": tc.delay})
			s := hgRun(t, c, up, calls, workers)
			t.Logf("HEDGE_DELAY=%s: %v", tc.delay, s)
			if tc.bound == 0 {
				if s.p99 < slow || s.extra != 0 || s.st.HedgesSent != 0 {
					t.Errorf("without hedging: p99 %v (want >= %v), %d extra requests (want 0)", s.p99, slow, s.extra)
				}
				return
			}
			if s.p99 >= tc.bound {
				t.Errorf("p99 = %v, want < %v (the delay plus the fast path, not the %v slow path)", s.p99, tc.bound, slow)
			}
			if s.extra > int64(calls*tc.extra/100) {
				t.Errorf("%d extra upstream requests, want <= %d%% of %d calls", s.extra, tc.extra, calls)
			}
			// A hedge cancelled before it reached the upstream is sent
			// but not seen.
			if s.extra > int64(s.st.HedgesSent) || s.st.HedgesWon == 0 {
				t.Errorf("extra requests %d, Status hedges sent %d won %d: want extra <= sent, some won", s.extra, s.st.HedgesSent, s.st.HedgesWon)
			}
		})
	}
}

// Every response takes 300ms. Hedges cannot help; they stay within the
// retry throttle (ratio 0.2 of calls, 10/s, a bucket of 20) and the p99
// is no worse.
func TestHedgesStayWithinTheThrottleWhenEverythingIsSlow(t *testing.T) {
	t.Parallel()
	const calls, workers = 200, 20
	var p99 [2]time.Duration
	for i, delay := range []string{"0", "20ms"} {
		up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(300*time.Millisecond))
		c := hgClient(t, up.URL, map[string]string{"HEDGE_DELAY": delay, "RETRIES": "2"})
		start := time.Now()
		s := hgRun(t, c, up, calls, workers)
		elapsed := time.Since(start)
		p99[i] = s.p99
		bound := int64(calls*0.2 + 10*elapsed.Seconds() + 20)
		t.Logf("HEDGE_DELAY=%s, %d calls in %v: %v; throttle bound %d", delay, calls, elapsed.Round(time.Millisecond), s, bound)
		if s.extra > bound || s.extra != int64(s.st.HedgesSent+s.st.Retries) {
			t.Errorf("%d extra requests (hedges %d, retries %d), want hedges + retries = extra <= the throttle's %d",
				s.extra, s.st.HedgesSent, s.st.Retries, bound)
		}
		if delay != "0" && (s.st.HedgesSent == 0 || s.st.RetriesThrottled != 0) {
			t.Logf("note: hedges sent %d", s.st.HedgesSent)
		}
	}
	// The two runs share a machine with the rest of the suite: allow for
	// its noise (measured up to 80ms on a loaded 2-core box), not for a
	// tail that waits on losers (that would add a whole 300ms).
	if p99[1] > p99[0]+150*time.Millisecond {
		t.Errorf("p99 with hedging %v, without %v: hedging made the tail worse", p99[1], p99[0])
	}
}

// 1,000 hedged calls where the first copy of every 10th call hangs until
// cancelled. Every loser is cancelled and closed, its permit given back:
// no more connections than calls in flight plus hedges, nothing in flight
// once the calls are done, and (TestMain) no goroutine left.
func TestHedgeLosersAreCancelledAndReleased(t *testing.T) {
	t.Parallel()
	const calls, workers = 1000, 10
	up := outboundtest.NewUpstream(t, hgFirstSlow(10))
	// A throttle that never runs dry: a hanging first copy whose hedge the
	// throttle refused would wait READ_TIMEOUT, which is not this test.
	c := hgClient(t, up.URL, map[string]string{"HEDGE_DELAY": "25ms", "RETRY_BUDGET_RATIO": "1", "RETRY_BUDGET_MIN_PER_SEC": "10000"})
	s := hgRun(t, c, up, calls, workers)
	t.Logf("%v; upstream connections %d, max in flight %d", s, up.Conns(), up.MaxInFlight())
	if s.st.InFlight != 0 {
		t.Errorf("Status().InFlight = %d after every call ended, want 0", s.st.InFlight)
	}
	if s.st.HedgesWon < calls/10 {
		t.Errorf("hedges won %d, want at least the %d calls whose first copy hangs", s.st.HedgesWon, calls/10)
	}
	if max := int64(workers) + int64(s.st.HedgesSent); up.Conns() > max {
		t.Errorf("upstream accepted %d connections, want <= in flight %d + hedges %d", up.Conns(), workers, s.st.HedgesSent)
	}
	if n := s.st.BreakerCounts.Failures; n != 0 {
		t.Errorf("breaker counted %d failures: a cancelled loser is not the upstream's failure", n)
	}
}

// hgEvents records attempt events.
type hgEvents struct {
	mu sync.Mutex
	ev []observe.AttemptEvent
}

func (o *hgEvents) ObserveAttempt(e observe.AttemptEvent) {
	o.mu.Lock()
	o.ev = append(o.ev, e)
	o.mu.Unlock()
}

func (o *hgEvents) ObserveCall(observe.CallEvent) {}

func (o *hgEvents) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}

// A POST without an Idempotency-Key is never hedged; one with a key and a
// replayable body sends the same body both times, and the observers see
// which copy was the hedge and which won.
func TestHedgeOnlyReplayableRequests(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	var n atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if n.Add(1) == 1 && !outboundtest.Wait(r, time.Minute) { // the first copy hangs
			return
		}
		_, _ = io.WriteString(w, "copy "+strconv.FormatInt(n.Load(), 10))
	}))
	obs := &hgEvents{}
	c := hgClient(t, up.URL, map[string]string{"HEDGE_DELAY": "10ms",
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "200ms", "READ_TIMEOUT": "300ms", "CALL_TIMEOUT": "5s"}, WithObserver(obs))
	post := func(key string) (string, error) {
		req, _ := http.NewRequest(http.MethodPost, "/orders", bytes.NewReader([]byte("order=42")))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}

	// Without a key: one copy, which hangs until READ_TIMEOUT.
	if _, err := post(""); err == nil {
		t.Fatal("POST without a key: got an answer, want the read timeout of its only copy")
	}
	if got := up.Requests(); got != 1 || c.Status().HedgesSent != 0 {
		t.Fatalf("POST without a key: upstream saw %d requests, hedges %d; want 1 and 0", got, c.Status().HedgesSent)
	}

	// With a key: the hedge (the upstream's second request) answers.
	n.Store(0)
	mu.Lock()
	bodies = nil
	mu.Unlock()
	obs.mu.Lock()
	obs.ev = nil
	obs.mu.Unlock()
	got, err := post("k-1")
	if err != nil || got != "copy 2" {
		t.Fatalf("POST with a key = %q, %v; want the hedge's answer %q", got, err, "copy 2")
	}
	mu.Lock()
	if len(bodies) != 2 || bodies[0] != "order=42" || bodies[1] != "order=42" {
		t.Errorf("upstream bodies %q, want the same body twice", bodies)
	}
	mu.Unlock()
	if st := c.Status(); st.HedgesSent != 1 || st.HedgesWon != 1 || st.InFlight != 0 {
		t.Errorf("Status hedges sent %d won %d in flight %d, want 1, 1, 0", st.HedgesSent, st.HedgesWon, st.InFlight)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var desc []string
	for _, e := range obs.ev {
		desc = append(desc, fmt.Sprintf("attempt %d hedge %d won %v %s", e.Attempt, e.Hedge, e.Won, e.Outcome))
	}
	want := []string{"attempt 1 hedge 0 won false hedge_lost", "attempt 1 hedge 1 won true ok"}
	if strings.Join(desc, "; ") != strings.Join(want, "; ") {
		t.Errorf("attempt events:\n%s\nwant:\n%s", strings.Join(desc, "\n"), strings.Join(want, "\n"))
	}
}

// halfOpenCircuit lets every attempt through and says it is half-open.
type halfOpenCircuit struct{}

func (halfOpenCircuit) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	return send()
}

func (halfOpenCircuit) State() gobreaker.State { return gobreaker.StateHalfOpen }

func (halfOpenCircuit) Counts() gobreaker.Counts { return gobreaker.Counts{} }

// A hedge needs a free bulkhead permit, taken without waiting, and a
// closed breaker. The first copy of each call answers after 150ms, a copy
// at once.
func TestHedgeNeedsAFreePermitAndAClosedBreaker(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		env      map[string]string
		halfOpen bool
		want     string // the answer: "fast" from a hedge, "slow" from the first copy
	}{
		{"closed breaker, free permit", map[string]string{"MAX_CONCURRENT": "2"}, false, "fast"},
		{"bulkhead full", map[string]string{"MAX_CONCURRENT": "1"}, false, "slow"},
		{"breaker half-open", map[string]string{"MAX_CONCURRENT": "2"}, true, "slow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int64
			up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					if outboundtest.Wait(r, 150*time.Millisecond) {
						_, _ = io.WriteString(w, "slow")
					}
					return
				}
				_, _ = io.WriteString(w, "fast")
			}))
			env := map[string]string{"HEDGE_DELAY": "10ms"}
			for k, v := range tc.env {
				env[k] = v
			}
			c := hgClient(t, up.URL, env)
			if tc.halfOpen {
				c.cb = halfOpenCircuit{}
			}
			_, b := hgGet(t, c)
			st := c.Status()
			if string(b) != tc.want || st.InFlight != 0 {
				t.Errorf("answer %q (hedges sent %d), in flight %d; want %q, 0", b, st.HedgesSent, st.InFlight, tc.want)
			}
			wantHedges := uint64(0)
			if tc.want == "fast" {
				wantHedges = 1
			}
			if st.HedgesSent != wantHedges || up.Requests() != int64(1+wantHedges) {
				t.Errorf("hedges sent %d, upstream requests %d; want %d, %d", st.HedgesSent, up.Requests(), wantHedges, 1+wantHedges)
			}
		})
	}
}

// The first answer the caller should see wins. A temporary status from
// one copy waits for the copies still in flight; HEDGE_MAX copies go out
// one per delay.
func TestHedgeFirstUsefulAnswerWins(t *testing.T) {
	t.Parallel()
	hang := func(r *http.Request) bool { return outboundtest.Wait(r, time.Minute) }
	hedged := make(chan struct{}) // the first case's hedge has reached the upstream
	cases := []struct {
		name   string
		max    string
		answer func(n int64, w http.ResponseWriter, r *http.Request) // n: the request's rank at the upstream
		want   string
		hedges uint64
	}{
		{"a 503 waits for the hedge", "1", func(n int64, w http.ResponseWriter, r *http.Request) {
			if n == 1 { // answers 503 once the hedge has arrived
				select {
				case <-hedged:
					w.WriteHeader(http.StatusServiceUnavailable)
				case <-r.Context().Done():
				}
				return
			}
			close(hedged)
			if outboundtest.Wait(r, 150*time.Millisecond) { // then answers, well after the 503
				_, _ = io.WriteString(w, "hedge")
			}
		}, "200 hedge", 1},
		{"three hedges, the last answers", "3", func(n int64, w http.ResponseWriter, r *http.Request) {
			if n < 4 {
				hang(r)
				return
			}
			_, _ = io.WriteString(w, "copy 4")
		}, "200 copy 4", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int64
			up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.answer(n.Add(1), w, r)
			}))
			c := hgClient(t, up.URL, map[string]string{"HEDGE_DELAY": "20ms", "HEDGE_MAX": tc.max})
			resp, b := hgGet(t, c)
			st := c.Status()
			if got := fmt.Sprintf("%d %s", resp.StatusCode, b); got != tc.want || st.HedgesSent != tc.hedges || st.HedgesWon != 1 || st.InFlight != 0 {
				t.Errorf("answer %q, hedges sent %d won %d, in flight %d; want %q, %d, 1, 0",
					got, st.HedgesSent, st.HedgesWon, st.InFlight, tc.want, tc.hedges)
			}
		})
	}
}

// The attempt records of a hedged attempt say which copy each was and
// which won.
func TestHedgeLogRecordsNameEachCopy(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 && !outboundtest.Wait(r, time.Minute) { // the first copy hangs
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	var buf lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := hgClient(t, up.URL, map[string]string{"HEDGE_DELAY": "10ms"}, WithLogger(logger))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	out := buf.String()
	for _, want := range []string{`"outbound.outcome":"hedge_lost","outbound.duration_ms":`, `"outbound.hedge":0,"outbound.won":false`,
		`"http.response.status_code":200,"outbound.outcome":"ok","outbound.duration_ms":`, `"outbound.hedge":1,"outbound.won":true`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

// A hedge whose body cannot be produced again (GetBody fails) is not
// sent, and gives back both what it took: its bulkhead permit and its
// retry throttle token. The first copy is answered only once the hedge
// has called GetBody, so the hedge always tries; the throttle starts full
// and gains nothing per second, so a token kept by the failed hedge shows
// as a throttle below its ceiling.
func TestHedgeWithoutReplayableBodyGivesBackPermitAndToken(t *testing.T) {
	t.Parallel()
	tried := make(chan struct{})
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-tried:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	c := hgClient(t, up.URL, map[string]string{"HEDGE_DELAY": "10ms", "RETRY_BUDGET_MIN_PER_SEC": "0"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/orders", bytes.NewReader([]byte("order=42")))
	req.Header.Set("Idempotency-Key", "k-1")
	var once sync.Once
	req.GetBody = func() (io.ReadCloser, error) {
		once.Do(func() { close(tried) })
		return nil, fmt.Errorf("body gone")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 from the first copy", resp.StatusCode)
	}
	st := c.Status()
	if up.Requests() != 1 || st.HedgesSent != 0 || st.InFlight != 0 {
		t.Errorf("upstream saw %d requests, hedges sent %d, in flight %d; want 1, 0, 0", up.Requests(), st.HedgesSent, st.InFlight)
	}
	// The bucket starts full (20 tokens at the baseline) and holds 20 at
	// most: a token lost to the hedge never sent leaves 19.
	tokens := 0
	for c.throttle.Retry(time.Now()) {
		tokens++
	}
	if tokens != 20 {
		t.Errorf("the retry throttle holds %d tokens after a hedge that was never sent, want it back at its ceiling 20", tokens)
	}
}

// hgGet sends one GET / through c, bounded by 5s, and returns the answer
// with its body read and closed.
func hgGet(t *testing.T, c *Client) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, b
}

// The observers get each copy's own duration, not the race's: a first
// copy that fails after 50ms is reported with about that, though the
// hedge that wins answers 1.5s later.
func TestHedgedCopyDurationIsItsOwn(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 { // the first copy: a 503 once the hedge is out
			if outboundtest.Wait(r, 50*time.Millisecond) {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		if outboundtest.Wait(r, 1500*time.Millisecond) {
			_, _ = io.WriteString(w, "ok")
		}
	}))
	obs := &hgEvents{}
	c := hgClient(t, up.URL, map[string]string{"HEDGE_DELAY": "10ms"}, WithObserver(obs))
	if resp, body := hgGet(t, c); resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("%d %q, want the hedge's 200 ok", resp.StatusCode, body)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, e := range obs.ev {
		if e.Hedge == 0 && (e.Status != http.StatusServiceUnavailable || e.Duration > time.Second) {
			t.Errorf("first copy: status %d after %v, want its 503 after about 50ms", e.Status, e.Duration)
		}
		if e.Hedge == 1 && e.Duration < time.Second {
			t.Errorf("hedge: %v, want its own 1.5s", e.Duration)
		}
	}
	if len(obs.ev) != 2 {
		t.Errorf("%d attempt events, want 2: %+v", len(obs.ev), obs.ev)
	}
}
