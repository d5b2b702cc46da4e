package statuspage

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// RingSize is the number of recent call durations a [Recorder] keeps per
// system for the page's percentiles.
const RingSize = 512

// Recorder is a [observe.Observer] that keeps, per system, the
// durations of the last [RingSize] calls that sent at least one attempt,
// the time of the last breaker transition, and the last failure of a
// call that sent something (an error or a failed status; a refusal is
// not one, so that the failure that opened a breaker stays in view while
// the breaker refuses): what Status cannot tell. Create it with [NewRecorder], pass it to
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

	breakerAt time.Time // last transition seen, zero if none
	last      failure   // the last failure of a call that sent something
}

// failure is a call that failed after sending: its error (formatted only
// when the page asks) or, for a failed status, the status.
type failure struct {
	err      error
	at       time.Time
	out      observe.Outcome
	method   string
	status   int
	attempts int
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	r := &Recorder{now: time.Now}
	empty := map[string]*systemRecord{}
	r.systems.Store(&empty)
	return r
}

// ObserveAttempt implements observe.Observer; attempts are not
// recorded (calls are what the caller waits for).
func (r *Recorder) ObserveAttempt(observe.AttemptEvent) {}

// ObserveCall implements observe.Observer.
func (r *Recorder) ObserveCall(e observe.CallEvent) {
	s := r.system(e.System)
	failed := e.Outcome != observe.OutcomeOK && !e.Outcome.Refused()
	var now time.Time
	if failed {
		now = r.now()
	}
	s.mu.Lock()
	if e.Attempts > 0 {
		s.durations[s.n%RingSize] = e.Duration
		s.n++
	}
	if failed {
		s.last = failure{err: e.Err, at: now, out: e.Outcome, method: e.Method, status: e.Status, attempts: e.Attempts}
	}
	s.mu.Unlock()
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
	Latency   *Latency
	BreakerAt time.Time
	Last      failure // zero when no call failed after sending
}

// snapshot copies the record of system under its lock and computes the
// percentiles outside it.
func (r *Recorder) snapshot(system string) snapshot {
	if r == nil {
		return snapshot{}
	}
	s, ok := (*r.systems.Load())[system]
	if !ok {
		return snapshot{}
	}
	var ring [RingSize]time.Duration
	s.mu.Lock()
	n := int(min(s.n, RingSize))
	copy(ring[:], s.durations[:n])
	out := snapshot{BreakerAt: s.breakerAt, Last: s.last}
	s.mu.Unlock()
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

// percentile returns the nearest-rank q-quantile of sorted, non-empty d.
func percentile(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.999999999) - 1 // ceil(q*n) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// message says what went wrong: the error, redacted, or the status the
// call ended with.
func (f failure) message() string {
	if f.err != nil {
		return scrub(f.err.Error())
	}
	return fmt.Sprintf("%s answered %d %s after %d attempt(s)", f.method, f.status, http.StatusText(f.status), f.attempts)
}
