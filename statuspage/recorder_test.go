package statuspage

import (
	"errors"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(i+1) * time.Millisecond // 1..100ms, sorted
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(d, tc.q); got != tc.want {
			t.Errorf("percentile(1..100ms, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
}

func TestRecorderRing(t *testing.T) {
	r := NewRecorder()
	if s := r.snapshot("inv"); s.Latency != nil {
		t.Fatalf("latency before any call: %+v", s.Latency)
	}
	// Calls refused before any attempt have no duration to record, and
	// are no failure.
	r.ObserveCall(observe.CallEvent{System: "inv", Outcome: observe.OutcomeBulkheadFull, Err: errors.New("full")})
	if s := r.snapshot("inv"); s.Latency != nil || !s.Last.at.IsZero() {
		t.Fatalf("after a rejection: %+v", s)
	}
	r.ObserveCall(observe.CallEvent{System: "inv", Method: "GET", Attempts: 3, Status: 503, Duration: time.Second, Outcome: observe.OutcomeGaveUp})
	// Fill the ring twice over: 1000 slow calls, then RingSize fast
	// ones; only the fast ones remain.
	for range 999 {
		r.ObserveCall(observe.CallEvent{System: "inv", Attempts: 1, Duration: time.Second, Outcome: observe.OutcomeOK})
	}
	for i := range RingSize {
		r.ObserveCall(observe.CallEvent{System: "inv", Attempts: 1, Duration: time.Duration(i+1) * time.Millisecond, Outcome: observe.OutcomeOK})
	}
	l := r.snapshot("inv").Latency
	if l == nil || l.Samples != RingSize || l.MaxMS != RingSize || l.P50MS != RingSize/2 || l.P99MS != 507 {
		t.Fatalf("latency %+v, want %d samples of 1..%dms", l, RingSize, RingSize)
	}
	if s := r.snapshot("inv"); s.Last.out != observe.OutcomeGaveUp || s.Last.message() != "GET answered 503 Service Unavailable after 3 attempt(s)" {
		t.Errorf("a success replaced the last failure: %+v %q", s.Last, s.Last.message())
	}
	var nilRec *Recorder
	if s := nilRec.snapshot("inv"); s.Latency != nil {
		t.Errorf("nil recorder: %+v", s)
	}
}

// TestRecorderKeepsTheFailureThatOpenedTheBreaker checks that the
// refusals of an open breaker, forced or not, do not replace the last
// failure of a call that was sent: the one that opened it.
func TestRecorderKeepsTheFailureThatOpenedTheBreaker(t *testing.T) {
	r := NewRecorder()
	r.ObserveCall(observe.CallEvent{System: "inv", Method: "GET", Attempts: 1, Op: observe.OpConnect, Err: errors.New("dial tcp 10.0.0.9:443: connection refused"), Outcome: observe.OutcomeGaveUp})
	for _, out := range []observe.Outcome{observe.OutcomeBreakerOpen, observe.OutcomeForcedOpen, observe.OutcomeRateLimited, observe.OutcomeBudgetSpent} {
		r.ObserveCall(observe.CallEvent{System: "inv", Method: "GET", Err: errors.New("breaker open"), Outcome: out})
	}
	if l := r.snapshot("inv").Last; l.out != observe.OutcomeGaveUp || l.message() != "dial tcp 10.0.0.9:443: connection refused" {
		t.Errorf("last failure %s %q, want the refused connect", l.out, l.message())
	}
}

func TestRecorderBreakerTime(t *testing.T) {
	r := NewRecorder()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r.now = func() time.Time { return at }
	r.ObserveBreaker("inv", observe.BreakerClosed, observe.BreakerOpen)
	if got := r.snapshot("inv").BreakerAt; !got.Equal(at) {
		t.Fatalf("breaker changed at %v, want %v", got, at)
	}
}

func TestRecorderAllocatesNothing(t *testing.T) {
	r := NewRecorder()
	ok := observe.CallEvent{System: "inv", Attempts: 1, Duration: time.Millisecond, Outcome: observe.OutcomeOK}
	failed := observe.CallEvent{System: "inv", Err: errors.New("open"), Outcome: observe.OutcomeBreakerOpen}
	timeout := observe.AttemptEvent{System: "inv", Attempt: 1, Op: observe.OpReadTimeout, Err: errors.New("timeout"), Outcome: observe.OutcomeRetry}
	r.ObserveCall(ok)
	allocs := testing.AllocsPerRun(500, func() {
		r.ObserveAttempt(observe.AttemptEvent{System: "inv", Attempt: 1})
		r.ObserveAttempt(timeout)
		r.ObserveCall(ok)
		r.ObserveCall(failed)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per event, want 0", allocs)
	}
}

func TestScrub(t *testing.T) {
	for in, want := range map[string]string{
		`Get "http://alice:pw@inv.internal/x?token=abc&page=2": EOF`: `Get "http://REDACTED@inv.internal/x?token=REDACTED&page=2": EOF`,
		`dial tcp 127.0.0.1:1: connect: connection refused`:          `dial tcp 127.0.0.1:1: connect: connection refused`,
		`https://h/p?page=1&api_key=s3cr3t`:                          `https://h/p?page=1&api_key=REDACTED`,
	} {
		if got := scrub(in); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRecorderKeepsTheAttemptThatOpenedTheBreaker checks which attempts
// count as the failure that opened a breaker: one that was sent and that
// the breaker counts, not a refusal, a lost hedge, the caller's
// cancellation or a status the breaker does not count.
func TestRecorderKeepsTheAttemptThatOpenedTheBreaker(t *testing.T) {
	r := NewRecorder()
	r.ObserveAttempt(observe.AttemptEvent{System: "inv", Method: "GET", Attempt: 1, Op: observe.OpReadTimeout,
		Err: errors.New("net/http: timeout awaiting response headers"), Outcome: observe.OutcomeRetry})
	for _, e := range []observe.AttemptEvent{
		{Attempt: 2, Op: observe.OpBreaker, Err: errors.New("breaker open"), Outcome: observe.OutcomeBreakerOpen},
		{Attempt: 2, Op: observe.OpForcedOpen, Err: errors.New("circuit forced open"), Outcome: observe.OutcomeForcedOpen},
		{Attempt: 2, Op: observe.OpRateLimit, Err: errors.New("rate limited"), Outcome: observe.OutcomeRateLimited},
		{Attempt: 2, Op: observe.OpCanceled, Err: errors.New("context canceled"), Outcome: observe.OutcomeHedgeLost},
		{Attempt: 2, Op: observe.OpCanceled, Err: errors.New("context canceled"), Outcome: observe.OutcomeCanceled},
		{Attempt: 2, Status: 409, Outcome: observe.OutcomeRetry}, // a 409 with Retry-After: retried, not a failure
		{Attempt: 2, Status: 200, Outcome: observe.OutcomeOK},
	} {
		e.System, e.Method = "inv", "GET"
		r.ObserveAttempt(e)
	}
	if f := r.snapshot("inv").Attempt; f.message() != "GET attempt 1: read timeout: net/http: timeout awaiting response headers" {
		t.Errorf("the attempt that opened the breaker: %q", f.message())
	}
	r.ObserveAttempt(observe.AttemptEvent{System: "inv", Method: "GET", Attempt: 3, Status: 503, Outcome: observe.OutcomeGaveUp})
	if f := r.snapshot("inv").Attempt; f.message() != "GET attempt 3 answered 503 Service Unavailable" {
		t.Errorf("after a 503: %q", f.message())
	}
}

// TestOpenedByIgnoresAFailureBeforeTheBreakersWindow checks that a
// breaker that opened with no failure of this pod in its window (other
// pods' failures, at scope fleet) is not said to be opened by an older
// one, and that neither a breaker forced open nor a closed one is said
// to be opened by a failure.
func TestOpenedByIgnoresAFailureBeforeTheBreakersWindow(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := observe.Status{System: "inv", Breaker: observe.BreakerOpen,
		Config: []config.Var{{Setting: "BreakerWindow", Value: "30s"}}}
	snap := snapshot{BreakerAt: at, Attempt: failure{at: at.Add(-20 * time.Second), method: "GET", status: 503, attempts: 1, attempt: true}}
	if got := openedBy(st, snap); got == nil || got.Message != "GET attempt 1 answered 503 Service Unavailable" {
		t.Errorf("a failure 20s before the breaker opened, window 30s: %+v", got)
	}
	snap.Attempt.at = at.Add(-time.Minute)
	if got := openedBy(st, snap); got != nil {
		t.Errorf("a failure 1m before the breaker opened, window 30s: %+v, want none", got)
	}
	snap.Attempt.at = at
	st.Forced = &observe.Forced{State: observe.BreakerOpen, Until: at.Add(time.Hour)}
	if got := openedBy(st, snap); got != nil {
		t.Errorf("forced open: %+v, want none", got)
	}
	st.Forced, st.Breaker = nil, observe.BreakerClosed
	if got := openedBy(st, snap); got != nil {
		t.Errorf("closed: %+v, want none", got)
	}
}

// TestRecorderRates checks the rate of the calls that ended over the
// last RateWindow, refused ones counted in it and apart, on a clock the
// test moves.
func TestRecorderRates(t *testing.T) {
	r := NewRecorder()
	t0 := time.Unix(1_000_000, 0)
	now := t0
	r.now = func() time.Time { return now }
	if got := r.snapshot("inv").Rate; got == nil || *got != (CallRate{}) {
		t.Fatalf("before any call: %+v, want 0", got)
	}
	// 7 seconds of 20 calls sent and 100 refused each second.
	for s := range 7 {
		now = t0.Add(time.Duration(s) * time.Second)
		for range 20 {
			r.ObserveCall(observe.CallEvent{System: "inv", Attempts: 1, Duration: time.Millisecond, Outcome: observe.OutcomeOK})
		}
		for range 100 {
			r.ObserveCall(observe.CallEvent{System: "inv", Op: observe.OpBreaker, Outcome: observe.OutcomeBreakerOpen})
		}
		if s == 1 {
			now = now.Add(time.Second)
			if got := r.snapshot("inv").Rate; *got != (CallRate{Calls: 120, Refused: 100}) {
				t.Errorf("2 s after the first call: %+v, want 120 calls/s, 100 refused", got)
			}
		}
	}
	now = t0.Add(9 * time.Second) // the window is seconds 5..9: calls in 5 and 6, over 4 s
	if got := r.snapshot("inv").Rate; *got != (CallRate{Calls: 2 * 120 / 4.0, Refused: 2 * 100 / 4.0}) {
		t.Errorf("after 9 s: %+v, want the calls of seconds 5 and 6 over 4 s", got)
	}
	now = t0.Add(7*time.Second + RateWindow)
	if got := r.snapshot("inv").Rate; *got != (CallRate{}) {
		t.Errorf("%s after the last call: %+v, want 0", RateWindow, got)
	}
	// A burst in the first moment is not read as a rate many times its
	// size: the span is one second at least.
	now = t0.Add(time.Hour)
	r.ObserveCall(observe.CallEvent{System: "pay", Op: observe.OpBulkhead, Outcome: observe.OutcomeBulkheadFull})
	if got := r.snapshot("pay").Rate; *got != (CallRate{Calls: 1, Refused: 1}) {
		t.Errorf("one call just now: %+v, want 1 call/s", got)
	}
}
