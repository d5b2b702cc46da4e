package registry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// capacityUpstream is an upstream with a real capacity: workers serve one
// request each for service, the others queue in arrival order, so latency
// grows with the load beyond the workers. failEvery > 0 answers 503 to
// every failEvery-th request (after its service, as a loaded server would).
type capacityUpstream struct {
	service   time.Duration
	failEvery int64

	mu      sync.Mutex
	workers int
	busy    int
	queue   []chan struct{}
	n       atomic.Int64
}

func newCapacityUpstream(workers int, service time.Duration) *capacityUpstream {
	return &capacityUpstream{workers: workers, service: service}
}

func (u *capacityUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !u.enter(r.Context()) {
		return
	}
	t := time.NewTimer(u.service)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	u.leave()
	if u.failEvery > 0 && u.n.Add(1)%u.failEvery == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Length", "2")
	_, _ = io.WriteString(w, "ok")
}

// enter takes a worker, queueing for one; false if ctx ended first.
func (u *capacityUpstream) enter(ctx context.Context) bool {
	u.mu.Lock()
	if u.busy < u.workers {
		u.busy++
		u.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	u.queue = append(u.queue, ch)
	u.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		u.mu.Lock()
		i := slices.Index(u.queue, ch)
		if i >= 0 {
			u.queue = slices.Delete(u.queue, i, i+1)
		}
		u.mu.Unlock()
		if i < 0 {
			u.leave() // handed a worker just as ctx ended
		}
		return false
	}
}

// leave frees a worker, handing it to the longest waiter.
func (u *capacityUpstream) leave() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.busy <= u.workers && len(u.queue) > 0 {
		close(u.queue[0])
		u.queue = u.queue[1:]
		return
	}
	u.busy--
}

// size is the number of workers.
func (u *capacityUpstream) size() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.workers
}

// resize sets the number of workers, waking waiters if it grew.
func (u *capacityUpstream) resize(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.workers = n
	for u.busy < u.workers && len(u.queue) > 0 {
		u.busy++
		close(u.queue[0])
		u.queue = u.queue[1:]
	}
}

// warm opens a connection for each of callers and shows the adaptive
// limit the upstream's service time with no queue: the upstream has a
// worker per caller while callers send two rounds of calls at once (the
// first dials, the second reuses), then goes back to its workers. A cold
// start measures the best latency with the dials in it, which on a loaded
// machine can be several service times, and the limit then settles as
// far above the capacity (45 for 8 workers); a probe corrects that
// within seconds (bulkhead's TestLimiterProbeSoon), longer than a test
// here watches.
func warm(c *registry.Client, up *capacityUpstream, callers int) {
	workers := up.size()
	up.resize(callers)
	defer up.resize(workers)
	for range 2 {
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() { _, _ = getOnce(c) })
		}
		wg.Wait()
	}
}

// warmPastProbe is warm, then callers calling on, closed-loop, still with
// a worker each, for 2s and until no probe of the limit runs. The limit's
// first probe is due a second after its first window, unless a window
// with no queue (a median within a tenth of the best) has put it off by
// 10s: either way, by 2s it has come and gone, or it is 10s away, past
// the test. While a probe runs, the bulkhead admits half the limit: the
// calls in flight drop from all the callers to half of them. Without
// this, a warm-up slowed by a loaded machine can leave the first probe
// due as the test's own load starts: a probe that starts on a queue
// deeper than its window takes the queue for the best latency, and the
// limit stops following for seconds (a defect of the limit, reported
// with the tests that showed it).
func warmPastProbe(t *testing.T, c *registry.Client, up *capacityUpstream, callers int) {
	t.Helper()
	warm(c, up, callers)
	workers := up.size()
	up.resize(callers)
	defer up.resize(workers)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = getOnce(c)
			}
		})
	}
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			t.Logf("a probe of the limit still running after the warm-up's 5s")
			return
		case <-tick.C:
		}
		if time.Since(start) >= 2*time.Second && c.Status().InFlight > int64(callers*3/4) {
			return
		}
	}
}

// load is the figures of one closed-loop run.
type load struct {
	ok, failed, full int64
	lat              []time.Duration // of the calls answered 200
	limits           []int64         // Status().Limit every 100ms
}

func (l *load) pct(p float64) time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	s := slices.Clone(l.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (l *load) String() string {
	return fmt.Sprintf("%d ok, %d failed, %d refused by the bulkhead; p50 %v, p99 %v",
		l.ok, l.failed, l.full, l.pct(0.5).Round(100*time.Microsecond), l.pct(0.99).Round(100*time.Microsecond))
}

// drive runs callers closed-loop against c for d: each sends GET /, reads
// and closes the body, and sends the next; a caller refused by the
// bulkhead waits 5ms before it tries again. every runs each 100ms.
func drive(t *testing.T, c *registry.Client, callers int, d time.Duration, every func(elapsed time.Duration)) *load {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu  sync.Mutex
		res load
		wg  sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			var mine []time.Duration
			var ok, failed, full int64
			for ctx.Err() == nil {
				t0 := time.Now()
				status, err := getOnce(c)
				switch {
				case errors.Is(err, bulkhead.ErrFull):
					full++
					time.Sleep(5 * time.Millisecond)
				case err != nil:
					if failed++; failed == 1 {
						t.Logf("first error: %v", err)
					}
				case status != http.StatusOK:
					failed++
				default:
					ok++
					mine = append(mine, time.Since(t0))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.ok, res.failed, res.full = res.ok+ok, res.failed+failed, res.full+full
			res.lat = append(res.lat, mine...)
		})
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			res.limits = append(res.limits, c.Status().Limit)
			if every != nil {
				every(time.Since(start))
			}
		}
	}
	wg.Wait()
	return &res
}

// getOnce sends GET / with its own bound (the end of a run must not
// spend the budget of the calls sent just before it), reads the body and
// closes it.
func getOnce(c *registry.Client) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Body.Close()
}

// adaptiveEnv is the variables of system sys on url, 64 permits at most,
// no retries (a call is one attempt), and extra on top.
func adaptiveEnv(sys, url string, extra ...string) map[string]string {
	p := strings.ToUpper(sys)
	env := map[string]string{
		"OUTBOUND_SYSTEMS":    sys,
		p + "_BASE_URL":       url,
		p + "_MAX_CONCURRENT": "64",
		p + "_RETRIES":        "0",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[p+"_"+extra[i]] = extra[i+1]
	}
	return env
}

// 64 callers on an upstream of 8 workers x 10ms (800 calls/s). A fixed
// MAX_CONCURRENT=64 queues 56 calls at the upstream (p99 ~ 8 x 10ms); the
// adaptive limit settles near 8..16, keeps the upstream busy and the
// latency within 2-3x the service time. The limit is logged when it moves
// a lot.
func TestAdaptiveLimitSettlesNearCapacity(t *testing.T) {
	// Not parallel: it compares throughputs, which other tests would disturb.
	const service, workers, callers = 10 * time.Millisecond, 8, 64
	const run = 3 * time.Second
	capacity := float64(workers) * float64(run) / float64(service)
	results := map[string]*load{}
	logs := &limitLogs{}
	for _, adaptive := range []string{"false", "true"} {
		up := newCapacityUpstream(workers, service)
		srv := outboundtest.NewUpstream(t, up)
		logger := slog.New(logs)
		reg := registrytest.New(t, adaptiveEnv("up", srv.URL, "ADAPTIVE_CONCURRENCY", adaptive),
			registrytest.With(registry.WithLogger(logger)), registrytest.Watch(srv))
		c := reg.MustClient("up")
		warm(c, up, callers)
		res := drive(t, c, callers, run, nil)
		results[adaptive] = res
		t.Logf("adaptive=%s: %v; %.0f%% of capacity", adaptive, res, 100*float64(res.ok)/capacity)
	}
	fixed, adapt := results["false"], results["true"]
	t.Logf("adaptive limit every 100ms: %v", adapt.limits)
	// Real sockets under -race share two cores with the rest of the
	// suite, and the client's own CPU delays look like queueing, so the
	// limit settles more slowly here than in the exact model
	// (TestAdaptiveSettles, synctest: 11..16) or the bench (10..15). In a
	// CI run beside other packages the second half went 25 -> 12 (median
	// 22). So: the second half reaches the capacity's zone (<= 16) at
	// least once, its median stays at or below half the ceiling, and it
	// never goes back near the ceiling.
	tail := slices.Clone(adapt.limits[len(adapt.limits)/2:])
	slices.Sort(tail)
	if low, med, high := tail[0], tail[len(tail)/2], tail[len(tail)-1]; low < 4 || low > 16 || med > 32 || high > 40 {
		t.Errorf("second half: limit from %d to %d, median %d; want it to reach 8..16, a median <= 32 and never above 40", low, high, med)
	}
	// What the library decides is judged, not what a starved machine
	// delivered: the calls served depend on how much CPU the callers got
	// (beside two busy processes the adaptive side served 36 % of
	// capacity to the fixed one's 73 %, at a limit of 8..11, where the
	// upstream's capacity is 8), so they are logged; the throughput is
	// compared in the peer bench (bench/adaptive). The median latency
	// compares the upstream's queue, which the limit sets.
	if p50 := adapt.pct(0.5); p50 > fixed.pct(0.5)/2 {
		t.Errorf("adaptive p50 %v, want <= half the fixed bulkhead's %v (its queue)", p50, fixed.pct(0.5))
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	t.Logf("log records of the limit: %s", logs.b.String())
	if !strings.Contains(logs.b.String(), `msg="outbound concurrency limit changed" outbound.system=up outbound.limit.from=64 `) {
		t.Errorf("no log record of the limit leaving 64")
	}
}

// limitLogs keeps, as text, the records of the limit's moves; it drops
// the others (thousands of rejections) unformatted.
type limitLogs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *limitLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *limitLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *limitLogs) WithGroup(string) slog.Handler            { return l }
func (l *limitLogs) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != "outbound concurrency limit changed" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slog.NewTextHandler(&l.b, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}).Handle(ctx, r)
}

// The upstream's workers go 8 -> 32 -> 4 (50ms each, so that 32 workers
// stay within what a loaded test machine can drive under -race); the
// limit follows each way: below half the ceiling within 2s of 8 workers,
// up to at least twice that and twice the old capacity within 2.5s of 32,
// down to 10 or less within 3s of 4. Growth is judged against where the
// limit was, not against 32: a loaded machine's scheduling delays look
// like a queue to the limit and slow its growth (the exact figures are
// bulkhead's TestAdaptiveFollows, in a synctest bubble); the figures here
// are logged.
func TestAdaptiveLimitFollowsCapacity(t *testing.T) {
	t.Parallel()
	up := newCapacityUpstream(8, 50*time.Millisecond)
	srv := outboundtest.NewUpstream(t, up)
	// Callers beyond the limit wait for a permit rather than spin on
	// refusals, which would take the CPU the calls need.
	reg := registrytest.New(t, adaptiveEnv("up", srv.URL, "ADAPTIVE_CONCURRENCY", "true", "BULKHEAD_MAX_WAIT", "2s"),
		registrytest.Watch(srv))
	const grow, shrink, end = 2 * time.Second, 4500 * time.Millisecond, 7500 * time.Millisecond
	var atGrow, atShrink, peak int64
	grewAt, shrankAt := time.Duration(-1), time.Duration(-1)
	c := reg.MustClient("up")
	warmPastProbe(t, c, up, 64)
	res := drive(t, c, 64, end, func(e time.Duration) {
		l := c.Status().Limit
		switch {
		case e < grow:
		case atGrow == 0:
			atGrow = l
			up.resize(32)
		case e < shrink:
			peak = max(peak, l)
			if grewAt < 0 && l >= max(16, 2*atGrow) {
				grewAt = e - grow
			}
		case atShrink == 0:
			atShrink = l
			up.resize(4)
		case shrankAt < 0 && l <= 10:
			shrankAt = e - shrink
		}
	})
	t.Logf("%v; limit every 100ms (8 workers, 32 from %v, 4 from %v): %v", res, grow, shrink, res.limits)
	t.Logf("the limit went from %d to %d (peak %d) in %v after the capacity grew, from %d to 10 in %v after it fell",
		atGrow, max(16, 2*atGrow), peak, grewAt, atShrink, shrankAt)
	if atGrow == 0 || atGrow >= 32 {
		t.Errorf("limit %d with 8 workers after %v, want it settled below 32", atGrow, grow)
	}
	if grewAt < 0 {
		t.Errorf("the limit went from %d to a peak of %d in the %v after the capacity grew to 32, want %d (twice where it was, and twice the old capacity)",
			atGrow, peak, shrink-grow, max(16, 2*atGrow))
	}
	if shrankAt < 0 {
		t.Errorf("the limit did not fall from %d to 10 in the %v after the capacity fell to 4", atShrink, end-shrink)
	}
}

// An upstream that answers 503 to one call in five. The limit shrinks
// (from 32, with no queueing at all), and with BREAKER_FAILURE_RATIO=0.15
// the breaker still opens on the ratio.
func TestAdaptiveLimitShrinksOnFailures(t *testing.T) {
	t.Parallel()
	t.Run("limit", func(t *testing.T) {
		up := newCapacityUpstream(64, 10*time.Millisecond)
		up.failEvery = 5
		srv := outboundtest.NewUpstream(t, up)
		reg := registrytest.New(t, adaptiveEnv("up", srv.URL, "ADAPTIVE_CONCURRENCY", "true",
			"MAX_CONCURRENT", "32", "MIN_CONCURRENT", "4"), registrytest.Watch(srv))
		// The limit learns from the calls that end: on a starved machine
		// fewer end each second, so the calls run in rounds of a second
		// until it shrinks, for ten rounds at most.
		c := reg.MustClient("up")
		var seen []int64
		for round := 0; round < 10; round++ {
			res := drive(t, c, 32, time.Second, nil)
			seen = append(seen, res.limits...)
			t.Logf("round %d: %v", round+1, res)
			if c.Status().Limit <= 24 {
				return
			}
		}
		t.Errorf("limit %d after 10 rounds of 20%% 503s (every 100ms: %v), want it shrunk from 32 to 24 or less", c.Status().Limit, seen)
	})
	t.Run("breaker", func(t *testing.T) {
		up := newCapacityUpstream(64, time.Millisecond)
		up.failEvery = 5
		srv := outboundtest.NewUpstream(t, up)
		reg := registrytest.New(t, adaptiveEnv("up", srv.URL, "ADAPTIVE_CONCURRENCY", "true",
			"BREAKER_FAILURE_RATIO", "0.15", "BREAKER_MIN_REQUESTS", "20"), registrytest.Watch(srv))
		c := reg.MustClient("up")
		for i := range 100 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
			resp, err := c.Do(req)
			cancel()
			if errors.Is(err, registry.ErrCircuitOpen) {
				if i < 20 {
					t.Fatalf("breaker open after %d calls, want the ratio judged after 20", i)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
		t.Fatalf("breaker still closed after 100 calls with 20%% failing, status %+v", c.Status().BreakerCounts)
	})
}

// With ADAPTIVE_CONCURRENCY off, the limit is MAX_CONCURRENT and the
// bulkhead is the fixed one.
func TestAdaptiveOffKeepsMaxConcurrent(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, outboundtest.Healthy())
	reg := registrytest.New(t, adaptiveEnv("up", srv.URL, "MAX_CONCURRENT", "7"), registrytest.Watch(srv))
	if st := reg.MustClient("up").Status(); st.Limit != 7 || st.Capacity != 7 {
		t.Fatalf("limit %d, capacity %d; want 7, 7", st.Limit, st.Capacity)
	}
}

// The adaptive bulkhead counts a call that timed out as a failure of the
// upstream, and does not count one the caller cancelled: 15 timeouts
// halve the limit, 15 cancellations leave it alone. Each caller cancels
// 10ms after the upstream has its request, with READ_TIMEOUT far off, so
// that nothing but the cancellation can end the call. A timeout is a
// read timeout, or on a loaded machine a connect timeout (CONNECT_TIMEOUT
// must stay below READ_TIMEOUT): both tell of the upstream's load.
func TestAdaptiveLimitIgnoresCancelledCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, connect, read string
		cancel              bool
		want                int64
	}{
		{"read timeout", "80ms", "100ms", false, 8},
		{"caller cancels", "2s", "5s", true, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			arrived := make(chan struct{}, 1)
			srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case arrived <- struct{}{}:
				default:
				}
				<-r.Context().Done()
			}))
			reg := registrytest.New(t, adaptiveEnv("up", srv.URL, "ADAPTIVE_CONCURRENCY", "true", "MAX_CONCURRENT", "16",
				"CONNECT_TIMEOUT", tc.connect, "TLS_HANDSHAKE_TIMEOUT", tc.read, "READ_TIMEOUT", tc.read, "CALL_TIMEOUT", "10s"),
				registrytest.Watch(srv))
			c := reg.MustClient("up")
			ops := map[observe.Op]int{}
			for range 15 {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
				done := make(chan error, 1)
				go func() {
					_, err := c.Do(req)
					done <- err
				}()
				if tc.cancel {
					select {
					case <-arrived:
						// 15 calls of 10ms at least span a window of the
						// limit (100ms), which they would close if counted.
						time.Sleep(10 * time.Millisecond)
						cancel()
					case <-done:
						t.Fatal("the call ended before the upstream had it")
					}
				}
				err := <-done
				cancel()
				var e *registry.Error
				if !errors.As(err, &e) {
					t.Fatalf("err %v, want a *registry.Error", err)
				}
				ops[e.Op]++
				if tc.cancel && e.Op != observe.OpCanceled || !tc.cancel && e.Op != observe.OpReadTimeout && e.Op != observe.OpConnectTimeout {
					t.Fatalf("op %q (%v), want %s", e.Op, err, tc.name)
				}
			}
			if got := c.Status().Limit; got != tc.want {
				t.Fatalf("limit %d after 15 calls %v, want %d", got, ops, tc.want)
			}
		})
	}
}
