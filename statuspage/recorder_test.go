package statuspage

import (
	"errors"
	"testing"
	"time"

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
		r.ObserveCall(observe.CallEvent{System: "inv", Method: "GET", Err: errors.New("circuit open"), Outcome: out})
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
	r.ObserveCall(ok)
	allocs := testing.AllocsPerRun(500, func() {
		r.ObserveAttempt(observe.AttemptEvent{System: "inv", Attempt: 1})
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
