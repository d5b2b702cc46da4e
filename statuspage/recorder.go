package statuspage

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
)

// RingSize is the number of recent call durations a [Recorder] keeps per
// system for the page's percentiles.
const RingSize = 512

// RateWindow is the span over which a [Recorder] measures the rate of
// calls that end (the page's calls/s and refused/s): the last few
// seconds, in one-second slots.
const RateWindow = 5 * time.Second

const rateSlots = int64(RateWindow / time.Second)

// Recorder is a [observe.Observer] that keeps, per system, what Status
// cannot tell: the durations of the last [RingSize] calls that sent at
// least one attempt; how many calls ended in each second of the last
// [RateWindow], refused ones apart; the calls the caller's deadline
// ended; the time of the last breaker transition; the last failure of a
// call that sent something (an error or a failed status; a refusal is
// not one); and the last failure of an attempt that the breaker counts,
// which is what opened a breaker that is open (an open breaker sends
// nothing). Create it with [NewRecorder], pass it to
// registry.WithObserver, then to [Handler]. It is safe for concurrent
// use, and its event path allocates nothing.
type Recorder struct {
	// systems is copied on write under mu and read without a lock: the
	// set of systems is fixed once the registry is built.
	systems atomic.Pointer[map[string]*systemRecord]
	mu      sync.Mutex
	now     func() time.Time
}

type systemRecord struct {
	mu        sync.Mutex
	durations [RingSize]time.Duration
	n         uint64 // calls recorded since start; the next slot is n % RingSize

	first  time.Time              // the first call that ended, zero before it
	secs   [rateSlots]secondCount // slot sec % rateSlots counts second sec
	budget uint64                 // calls the caller's deadline ended (op budget timeout)

	breakerAt time.Time // last transition seen, zero if none
	last      failure   // the last failure of a call that sent something
	attempt   failure   // the last failure of an attempt the breaker counts
}

// secondCount is what ended in one second (Unix time sec).
type secondCount struct {
	sec            int64
	calls, refused uint64
}

// failure is a call or an attempt that failed after sending: its error
// (formatted only when the page asks) or, for a failed status, the
// status.
type failure struct {
	err      error
	at       time.Time
	out      observe.Outcome
	op       observe.Op
	method   string
	status   int
	attempts int  // a call's attempts sent; an attempt's number
	attempt  bool // an attempt, not a call
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	r := &Recorder{now: time.Now}
	empty := map[string]*systemRecord{}
	r.systems.Store(&empty)
	return r
}

// ObserveAttempt implements observe.Observer: it keeps the last failure
// of an attempt that was sent and that the breaker counts (a transport
// error or timeout, a failed status), so that an open breaker shows the
// failure that opened it even when the call it belonged to ended as a
// refusal (its retry refused by the breaker the attempt opened).
func (r *Recorder) ObserveAttempt(e observe.AttemptEvent) {
	if !breakerFailure(e) {
		return
	}
	s := r.system(e.System)
	now := r.now()
	s.mu.Lock()
	s.attempt = failure{err: e.Err, at: now, out: e.Outcome, op: e.Op, method: e.Method, status: e.Status, attempts: e.Attempt, attempt: true}
	s.mu.Unlock()
}

// breakerFailure reports whether e is an attempt that was sent and that
// the breaker counts as a failure: not a refusal, a cancelled race or
// the caller's cancellation.
func breakerFailure(e observe.AttemptEvent) bool {
	switch e.Outcome {
	case observe.OutcomeFailed, observe.OutcomeRetry, observe.OutcomeGaveUp:
	default:
		return false
	}
	if e.Err == nil {
		return policy.UpstreamFailure(e.Status) // a 409 the server said to retry is no failure of it
	}
	return e.Op.Verdict() == observe.VerdictFailure
}

// ObserveCall implements observe.Observer.
func (r *Recorder) ObserveCall(e observe.CallEvent) {
	s := r.system(e.System)
	refused := e.Outcome.Refused()
	failed := e.Outcome != observe.OutcomeOK && !refused
	now := r.now()
	sec := now.Unix()
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = now
	}
	c := &s.secs[slot(sec)]
	if c.sec != sec {
		*c = secondCount{sec: sec}
	}
	c.calls++
	if refused && e.Attempts == 0 {
		c.refused++ // with no I/O: not a call whose retry was refused
	}
	if e.Op == observe.OpBudgetTimeout {
		s.budget++
	}
	if e.Attempts > 0 {
		s.durations[s.n%RingSize] = e.Duration
		s.n++
	}
	if failed {
		s.last = failure{err: e.Err, at: now, out: e.Outcome, op: e.Op, method: e.Method, status: e.Status, attempts: e.Attempts}
	}
	s.mu.Unlock()
}

// slot is the index in secs of second sec.
func slot(sec int64) int64 {
	if i := sec % rateSlots; i >= 0 {
		return i
	}
	return sec%rateSlots + rateSlots
}

// ObserveBreaker implements observe.Observer.
func (r *Recorder) ObserveBreaker(system string, _, _ observe.BreakerState) {
	s := r.system(system)
	now := r.now()
	s.mu.Lock()
	s.breakerAt = now
	s.mu.Unlock()
}

func (r *Recorder) system(name string) *systemRecord {
	if s, ok := (*r.systems.Load())[name]; ok {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := *r.systems.Load()
	if s, ok := cur[name]; ok {
		return s
	}
	s := &systemRecord{}
	next := make(map[string]*systemRecord, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[name] = s
	r.systems.Store(&next)
	return s
}

// Latency summarises the recent call durations of one system, in
// milliseconds.
type Latency struct {
	Samples int     `json:"samples"` // calls in the window, at most RingSize
	P50MS   float64 `json:"p50_ms"`
	P90MS   float64 `json:"p90_ms"`
	P99MS   float64 `json:"p99_ms"`
	MaxMS   float64 `json:"max_ms"`
}

// snapshot is what the recorder knows about one system.
type snapshot struct {
	Latency        *Latency
	BreakerAt      time.Time
	Last           failure // zero when no call failed after sending
	Attempt        failure // zero when no attempt the breaker counts failed
	Rate           *CallRate
	BudgetTimeouts uint64
}

// snapshot copies the record of system under its lock and computes the
// percentiles and rates outside it.
func (r *Recorder) snapshot(system string) snapshot {
	if r == nil {
		return snapshot{}
	}
	s, ok := (*r.systems.Load())[system]
	if !ok {
		return snapshot{Rate: &CallRate{}} // no call yet
	}
	now := r.now()
	var ring [RingSize]time.Duration
	s.mu.Lock()
	n := int(min(s.n, RingSize))
	copy(ring[:], s.durations[:n])
	out := snapshot{BreakerAt: s.breakerAt, Last: s.last, Attempt: s.attempt, BudgetTimeouts: s.budget}
	secs, first := s.secs, s.first
	s.mu.Unlock()
	out.Rate = rate(secs, first, now)
	if n > 0 {
		d := ring[:n]
		slices.Sort(d)
		out.Latency = &Latency{
			Samples: n,
			P50MS:   ms(percentile(d, 0.50)),
			P90MS:   ms(percentile(d, 0.90)),
			P99MS:   ms(percentile(d, 0.99)),
			MaxMS:   ms(d[n-1]),
		}
	}
	return out
}

// rate returns the calls and the refused calls per second that secs
// count over the RateWindow that ends now: since the start of its first
// second, or since the first call (first) when that came later, and over
// one second at least, so that a burst just after start is not read as a
// rate many times its size.
func rate(secs [rateSlots]secondCount, first, now time.Time) *CallRate {
	var calls, refused uint64
	from := now.Unix() - rateSlots + 1 // the window's first second
	for _, c := range secs {
		if c.sec >= from && c.sec <= now.Unix() {
			calls += c.calls
			refused += c.refused
		}
	}
	span := max(now.Sub(later(time.Unix(from, 0), first)), time.Second).Seconds()
	return &CallRate{Calls: float64(calls) / span, Refused: float64(refused) / span}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// percentile returns the nearest-rank q-quantile of sorted, non-empty d.
func percentile(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.999999999) - 1 // ceil(q*n) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// message says what went wrong: the error, redacted, or the status the
// call (or the attempt) ended with.
func (f failure) message() string {
	switch {
	case f.attempt && f.err != nil:
		return fmt.Sprintf("%s attempt %d: %s: %s", f.method, f.attempts, f.op, scrub(f.err.Error()))
	case f.attempt:
		return fmt.Sprintf("%s attempt %d answered %d %s", f.method, f.attempts, f.status, http.StatusText(f.status))
	case f.err != nil:
		return scrub(f.err.Error())
	}
	return fmt.Sprintf("%s answered %d %s after %d attempt(s)", f.method, f.status, http.StatusText(f.status), f.attempts)
}
