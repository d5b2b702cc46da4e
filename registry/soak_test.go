package registry

// A soak test: a flapping upstream driven through three systems for as
// long as -soak says, then checks that nothing leaked and that every call
// ended in time with a response or a typed error. It is skipped unless
// -soak is set:
//
//	go test -race -run Soak ./registry/ -soak=20s -v
//
// (the package comes before -soak: go test hands every argument after an
// unknown flag to the test binary, so "-soak=20s ./registry/" would test
// the current directory instead).
//
// Helpers carry the prefix soak.

import (
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

var soakFor = flag.Duration("soak", 0, "run TestSoak for this long (e.g. -soak=20s); 0 skips it")

// The upstream's modes, switching every soakPeriod.
const (
	soakHealthy = iota // 200 after 0-2ms
	soakStorm          // 503
	soakHang           // no response headers until the client goes away
	soakReset          // connection reset (RST) after reading the request
	soakModes
)

var soakModeNames = [soakModes]string{"healthy", "503 storm", "hang", "reset"}

const (
	soakPeriod    = 2 * time.Second
	soakInFlight  = 64                     // callers, over the three systems
	soakMargin    = 250 * time.Millisecond // a call may outlive its deadline by this much
	soakCallLimit = 2 * time.Second        // CALL_TIMEOUT
	soakHistMax   = 5000                   // ms; the duration histogram's last bucket
)

// soakUpstream serves the mode of the moment; offset shifts its phase so
// the three systems are not all down at once.
type soakUpstream struct {
	start  time.Time
	offset int
	served [soakModes]atomic.Int64
}

func (u *soakUpstream) mode() int {
	return (int(time.Since(u.start)/soakPeriod) + u.offset) % soakModes
}

func (u *soakUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := u.mode()
	u.served[m].Add(1)
	switch m {
	case soakHealthy:
		if !outboundtest.Wait(r, time.Duration(rand.N(2000))*time.Microsecond) {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	case soakStorm:
		w.WriteHeader(http.StatusServiceUnavailable)
	case soakHang:
		// Read the body first: net/http notices a client that went away
		// (and cancels r.Context) only once the body is consumed.
		_, _ = io.Copy(io.Discard, r.Body)
		outboundtest.NewHang(nil).ServeHTTP(w, r)
	case soakReset:
		outboundtest.Reset().ServeHTTP(w, r)
	}
}

// soakTally counts how calls ended.
type soakTally struct {
	mu          sync.Mutex
	calls       int
	byOutcome   map[string]int // "200", "503", "op:read timeout", ...
	untyped     int            // errors that are not typed: must stay 0
	maxDur      time.Duration
	maxOver     time.Duration          // longest overshoot of a call's own deadline
	maxOverCall string                 // the call that overshot most
	overs       int                    // calls past deadline + soakMargin
	examples    []string               // a few of the untyped and overs
	durations   [soakHistMax + 1]int64 // calls by duration, in ms; fixed size
	bodyErrs    int
	perSystem   map[string]int
	transitions atomic.Int64 // breaker state changes
}

func (s *soakTally) ObserveAttempt(observe.AttemptEvent) {}
func (s *soakTally) ObserveCall(observe.CallEvent)       {}
func (s *soakTally) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {
	s.transitions.Add(1)
}

// soakSample is one look at the process.
type soakSample struct {
	at         time.Duration
	heap       uint64
	goroutines int
	fds        int
}

func TestSoak(t *testing.T) {
	if *soakFor <= 0 {
		t.Skip("soak test: run with -soak=DURATION (e.g. go test -race -run Soak ./registry/ -soak=20s)")
	}
	d := *soakFor
	start := time.Now()
	ups := [3]*soakUpstream{{start: start, offset: 0}, {start: start, offset: 1}, {start: start, offset: 2}}
	srvA := outboundtest.NewUpstream(t, ups[0])
	srvB := outboundtest.NewUpstream(t, ups[1])
	srvC := outboundtest.NewTLSUpstream(t, ups[2])
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvC.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	common := map[string]string{
		"CONNECT_TIMEOUT": "250ms", "TLS_HANDSHAKE_TIMEOUT": "500ms", "READ_TIMEOUT": "500ms",
		"CALL_TIMEOUT": soakCallLimit.String(), "RETRIES": "2", "BACKOFF_BASE": "10ms", "BACKOFF_MAX": "100ms",
		"BREAKER_WINDOW": "2s", "BREAKER_OPEN_TIMEOUT": "500ms", "BREAKER_MIN_REQUESTS": "20",
		"MAX_CONCURRENT": "24",
	}
	systems := map[string]map[string]string{
		"soak-a": {"BASE_URL": srvA.URL},
		// Fewer permits than its callers, and a short wait for one.
		"soak-b": {"BASE_URL": srvB.URL, "MAX_CONCURRENT": "16", "BULKHEAD_MAX_WAIT": "50ms"},
		"soak-c": {"BASE_URL": srvC.URL, "TLS_CA_FILE": caFile, "TLS_CA_ONLY": "true", "TLS_MIN_VERSION": "1.3"},
	}
	names := []string{"soak-a", "soak-b", "soak-c"}
	for _, env := range systems {
		for k, v := range common {
			if _, set := env[k]; !set {
				env[k] = v
			}
		}
	}
	tally := &soakTally{byOutcome: map[string]int{}, perSystem: map[string]int{}}
	loaded, err := config.LoadEnv(systemsEnv(systems))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(loaded, WithObserver(tally))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = r.Close()
		}
	})

	// Baselines: the servers and the registry exist, no call yet.
	runtime.GC()
	baseG := runtime.NumGoroutine()
	baseFD := testutil.CheckFDs(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapAlloc

	ctx, stop := context.WithTimeout(context.Background(), d)
	defer stop()

	// The sampler: heap after GC, goroutines, FDs, twice a second.
	var samples []soakSample
	var samplerWG sync.WaitGroup
	// The lag probe: how late a 10ms sleep wakes up. On a loaded machine
	// (-race, other test binaries on the same cores) every timer is late
	// by as much, call deadlines included; the deadline check allows it.
	var maxLag time.Duration
	samplerWG.Go(func() {
		for ctx.Err() == nil {
			t0 := time.Now()
			time.Sleep(10 * time.Millisecond)
			maxLag = max(maxLag, time.Since(t0)-10*time.Millisecond)
		}
	})
	samplerWG.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			samples = append(samples, soakSample{time.Since(start), m.HeapAlloc, runtime.NumGoroutine(), testutil.CheckFDs(t)})
		}
	})

	var wg sync.WaitGroup
	for i := range soakInFlight {
		c := r.MustClient(names[i%len(names)])
		wg.Go(func() {
			for ctx.Err() == nil {
				if soakCall(c, tally) {
					// Refused without I/O (breaker open, bulkhead
					// full): a real caller would not spin on it.
					time.Sleep(time.Duration(5+rand.N(5)) * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	samplerWG.Wait()
	runFor := time.Since(start)

	// Every permit is back.
	for _, st := range r.Status() {
		if st.InFlight != 0 {
			t.Errorf("%s: %d calls still hold a permit after every call returned", st.System, st.InFlight)
		}
	}
	statuses := r.Status()

	_ = r.Close()
	closed = true

	// Goroutines back to the baseline: connections close asynchronously
	// (transport read loops, the servers' connection goroutines).
	endG, endFD := runtime.NumGoroutine(), testutil.CheckFDs(t)
	settle := time.Now()
	for time.Since(settle) < 5*time.Second && (endG > baseG || (baseFD > 0 && endFD > baseFD)) {
		time.Sleep(50 * time.Millisecond)
		endG, endFD = runtime.NumGoroutine(), testutil.CheckFDs(t)
	}
	settled := time.Since(settle)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	endHeap := ms.HeapAlloc

	// The figures.
	tally.mu.Lock()
	defer tally.mu.Unlock()
	pct := func(p float64) time.Duration {
		want, seen := int64(p*float64(tally.calls)), int64(0)
		for ms, n := range tally.durations {
			if seen += n; seen > want {
				return time.Duration(ms) * time.Millisecond
			}
		}
		return soakHistMax * time.Millisecond
	}
	t.Logf("soak: %v, %d callers over %d systems (modes switch every %v: %s)", runFor.Round(time.Millisecond),
		soakInFlight, len(names), soakPeriod, strings.Join(soakModeNames[:], " / "))
	t.Logf("calls: %d (%.0f/s); per system %v", tally.calls, float64(tally.calls)/runFor.Seconds(), tally.perSystem)
	t.Logf("outcomes: %s", soakFormat(tally.byOutcome))
	for i, u := range ups {
		var served []string
		for m := range soakModes {
			served = append(served, fmt.Sprintf("%s=%d", soakModeNames[m], u.served[m].Load()))
		}
		t.Logf("upstream %s served: %s", names[i], strings.Join(served, " "))
	}
	for _, st := range statuses {
		t.Logf("status %s: calls=%d ok=%d retries=%d gave_up=%d bulkhead_refused=%d breaker_refused=%d retry_budget_denied=%d breaker=%s",
			st.System, st.Calls, st.OK, st.Retries, st.GaveUp, st.BulkheadRefused, st.BreakerRefused, st.RetriesThrottled, st.Breaker)
	}
	t.Logf("breaker transitions: %d; body read errors: %d", tally.transitions.Load(), tally.bodyErrs)
	t.Logf("call duration: p50=%v p99=%v max=%v; longest overshoot of a call's deadline: %v "+
		"(allowed %v + scheduling lag %v); calls over the deadline by more than %v: %d",
		pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), tally.maxDur.Round(time.Millisecond),
		tally.maxOver.Round(time.Millisecond), soakMargin, maxLag.Round(time.Millisecond), soakMargin, tally.overs)
	if tally.maxOverCall != "" {
		t.Logf("the call that overshot most: %s", tally.maxOverCall)
	}

	var peakG, peakFD int
	var firstHalf, secondHalf []uint64
	for _, s := range samples {
		peakG, peakFD = max(peakG, s.goroutines), max(peakFD, s.fds)
		if s.at < runFor/2 {
			firstHalf = append(firstHalf, s.heap)
		} else {
			secondHalf = append(secondHalf, s.heap)
		}
	}
	h1, h2 := soakMean(firstHalf), soakMean(secondHalf)
	t.Logf("goroutines: baseline %d, peak %d, after Close %d (settled in %v)", baseG, peakG, endG, settled.Round(time.Millisecond))
	t.Logf("open FDs: baseline %d, peak %d, after Close %d", baseFD, peakFD, endFD)
	t.Logf("heap after GC: baseline %s, mean first half %s (%d samples), mean second half %s (%d samples), after Close %s",
		soakMiB(baseHeap), soakMiB(h1), len(firstHalf), soakMiB(h2), len(secondHalf), soakMiB(endHeap))

	// The checks.
	if tally.calls == 0 {
		t.Fatal("no call was made")
	}
	if tally.untyped > 0 {
		t.Errorf("%d calls ended with an untyped error; e.g.:\n%s", tally.untyped, strings.Join(tally.examples, "\n"))
	}
	if allowed := soakMargin + maxLag; tally.maxOver > allowed {
		t.Errorf("a call outlived its deadline by %v, more than %v + the scheduling lag seen (%v): %s",
			tally.maxOver, soakMargin, maxLag, tally.maxOverCall)
	}
	if endG > baseG {
		t.Errorf("goroutines: %d after Close, baseline %d", endG, baseG)
		buf := make([]byte, 1<<20)
		t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
	}
	if baseFD > 0 {
		// Each connection costs two descriptors here (client and server
		// side); the pools hold at most MAX_CONCURRENT each.
		bound := baseFD + 2*(24+16+24) + 16
		if peakFD > bound {
			t.Errorf("open FDs peaked at %d, bound %d", peakFD, bound)
		}
		if endFD > baseFD {
			t.Errorf("open FDs: %d after Close, baseline %d", endFD, baseFD)
		}
	}
	if len(firstHalf) > 0 && len(secondHalf) > 0 && h2 > h1+h1/4+4<<20 {
		t.Errorf("heap grew from %s (first half) to %s (second half)", soakMiB(h1), soakMiB(h2))
	}
}

// soakCall makes one call with a random shape and records how it ended.
// It reports whether the call was refused without I/O.
func soakCall(c *Client, tally *soakTally) (refused bool) {
	ctx := context.Background()
	limit := soakCallLimit
	if c.Config().BulkheadMaxWait > 0 {
		// The bulkhead wait comes before CALL_TIMEOUT starts.
		limit += c.Config().BulkheadMaxWait
	}
	var cancel context.CancelFunc = func() {}
	shape := rand.N(8)
	if shape < 2 {
		// A caller with its own, shorter deadline.
		dl := time.Duration(300+rand.N(700)) * time.Millisecond
		ctx, cancel = context.WithTimeout(ctx, dl)
		limit = min(limit, dl)
	}
	defer cancel()
	method, body := http.MethodGet, io.Reader(nil)
	if shape == 7 {
		// Not replayable: no retries.
		method, body = http.MethodPost, strings.NewReader(`{"n":1}`)
	}
	req, _ := http.NewRequestWithContext(ctx, method, "/v1/item", body)

	t0 := time.Now()
	resp, err := c.Do(req)
	outcome := ""
	bodyErr := false
	if err == nil {
		_, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		outcome = fmt.Sprint(resp.StatusCode)
		if rerr != nil {
			bodyErr = true
			outcome += " (body: " + rerr.Error() + ")"
		}
	}
	dur := time.Since(t0)

	tally.mu.Lock()
	defer tally.mu.Unlock()
	tally.calls++
	tally.perSystem[c.Name()]++
	tally.durations[min(soakHistMax, int(dur/time.Millisecond))]++
	tally.maxDur = max(tally.maxDur, dur)
	if over := dur - limit; over > tally.maxOver {
		tally.maxOver = over
		tally.maxOverCall = fmt.Sprintf("%s %s took %v (limit %v): %s %v", c.Name(), method, dur.Round(time.Millisecond), limit, outcome, err)
	}
	if dur > limit+soakMargin {
		tally.overs++
		tally.example(fmt.Sprintf("%s %s took %v (limit %v): %s %v", c.Name(), method, dur, limit, outcome, err))
	}
	if bodyErr {
		tally.bodyErrs++
		tally.byOutcome["body error"]++
		return
	}
	if err == nil {
		tally.byOutcome[outcome]++
		return
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		tally.byOutcome["op:"+e.Op.String()]++
		return e.Attempts == 0 && (e.Op == observe.OpBreaker || e.Op == observe.OpBulkhead)
	case errors.Is(err, bulkhead.ErrFull), errors.Is(err, ErrCircuitOpen):
		tally.byOutcome["sentinel:"+err.Error()]++
	default:
		tally.byOutcome["untyped"]++
		tally.untyped++
		tally.example(fmt.Sprintf("untyped %T: %v", err, err))
	}
	return false
}

func (s *soakTally) example(e string) {
	if len(s.examples) < 10 {
		s.examples = append(s.examples, e)
	}
}

func soakMean(xs []uint64) uint64 {
	if len(xs) == 0 {
		return 0
	}
	var sum uint64
	for _, x := range xs {
		sum += x
	}
	return sum / uint64(len(xs))
}

func soakMiB(b uint64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

func soakFormat(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d  ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
