// Package breaker builds a system's own circuit breaker (gobreaker) from
// its settings and says how it counts an attempt: the judge a fleet's
// breaker shares, the errors that carry an attempt's op through
// gobreaker's Execute, and the causes of its refusals. It is internal:
// the registry's breaker stage is its user, and registry.FleetSystem.Judge and
// registry.ErrCircuitOpen its public face.
package breaker

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// ErrOpen is registry.ErrCircuitOpen: every refusal of the breaker
// matches it.
var ErrOpen = errors.New("outbound: breaker open")

// Rule is when a breaker trips: at least BREAKER_MIN_REQUESTS attempts of
// its window judged and BREAKER_FAILURE_RATIO of them failed. It may
// change while the breaker runs ([Rule.Set]): the state and the window's
// counts stay, and the next failure is judged by the new rule.
type Rule struct{ p atomic.Pointer[rule] }

type rule struct {
	min   uint32
	ratio float64
}

// NewRule returns the rule of settings c.
func NewRule(c config.Client) *Rule {
	r := new(Rule)
	r.Set(c)
	return r
}

// Set makes c's ratio and minimum the rule.
func (r *Rule) Set(c config.Client) {
	r.p.Store(&rule{min: uint32(c.BreakerMinRequests), ratio: c.BreakerFailureRatio})
}

// trips says whether counts n open the breaker.
func (r *Rule) trips(n gobreaker.Counts) bool {
	ru := r.p.Load()
	judged := n.TotalSuccesses + n.TotalFailures
	return judged >= ru.min && float64(n.TotalFailures) >= ru.ratio*float64(judged)
}

// New returns the system's own breaker: it trips by rule (nil: c's,
// fixed) over its BREAKER_WINDOW (ten buckets); it lets
// BREAKER_HALF_OPEN_PROBES probes through after BREAKER_OPEN_TIMEOUT.
// onChange (nil: none) hears every change of state; it runs under the
// breaker's lock.
func New(name string, c config.Client, rule *Rule, onChange func(from, to gobreaker.State)) *gobreaker.CircuitBreaker[*http.Response] {
	if rule == nil {
		rule = NewRule(c)
	}
	return build(name, c, rule.trips, onChange)
}

// Carried is what a breaker hands to the one that takes over from it
// when its window, open timeout or probes change (gobreaker fixes them
// when it builds a breaker): its state and its window's counts.
type Carried struct {
	State  gobreaker.State
	Counts gobreaker.Counts
}

// mostCarried bounds the outcomes a takeover replays: larger counts are
// scaled down to it, their ratio kept. It is twice the largest
// BREAKER_MIN_REQUESTS, so that a scaled window is still judged.
const mostCarried = 200_000

// TakeOver returns a breaker of settings c (as New) that goes on from
// was, the state of the breaker it replaces. Closed: it is closed with
// was's counts (their successes, then their failures, as of now), and
// judges them by rule at once (a rule or window that now trips on them
// opens it). Open or half-open: it is open, for c's BREAKER_OPEN_TIMEOUT
// from now, then lets c's probes through. onChange hears nothing of the
// takeover itself (the caller tells of a change it makes, if any), only
// what comes after.
func (was Carried) TakeOver(name string, c config.Client, rule *Rule, onChange func(from, to gobreaker.State)) *gobreaker.CircuitBreaker[*http.Response] {
	if rule == nil {
		rule = NewRule(c)
	}
	// The replay below runs on this goroutine before the breaker is
	// returned: no other goroutine reads quiet or trip until it is
	// published, after both are false.
	quiet, trip := true, false
	cb := build(name, c, func(n gobreaker.Counts) bool { return trip || rule.trips(n) },
		func(from, to gobreaker.State) {
			if !quiet && onChange != nil {
				onChange(from, to)
			}
		})
	ok := func() (*http.Response, error) { return nil, nil }
	failed := func() (*http.Response, error) { return nil, ErrFailedStatus }
	if was.State == gobreaker.StateClosed {
		s, f := uint64(was.Counts.TotalSuccesses), uint64(was.Counts.TotalFailures)
		if n := s + f; n > mostCarried {
			s, f = s*mostCarried/n, f*mostCarried/n
		}
		// Successes first: a prefix of the failures trips the rule only
		// if all of them do, so the state is the rule's on the whole.
		for range s {
			_, _ = cb.Execute(ok)
		}
		for range f {
			_, _ = cb.Execute(failed)
		}
	} else {
		trip = true
		_, _ = cb.Execute(failed)
	}
	quiet, trip = false, false
	return cb
}

// build is a breaker of settings c that trips when trips says so.
func build(name string, c config.Client, trips func(gobreaker.Counts) bool, onChange func(from, to gobreaker.State)) *gobreaker.CircuitBreaker[*http.Response] {
	return gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:         name,
		MaxRequests:  uint32(c.BreakerHalfOpenProbes),
		Interval:     c.BreakerWindow,
		BucketPeriod: c.BreakerWindow / 10,
		Timeout:      c.BreakerOpenTimeout,
		ReadyToTrip:  trips,
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if onChange != nil {
				onChange(from, to)
			}
		},
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return err != nil && Judge(err) == observe.VerdictExcluded },
	})
}

// SameSettings reports whether a and b build the same breaker: window,
// open timeout and probes, which a running gobreaker cannot change (a
// change of them needs [Carried.TakeOver]; the rule changes in place).
func SameSettings(a, b config.Client) bool {
	return a.BreakerWindow == b.BreakerWindow && a.BreakerOpenTimeout == b.BreakerOpenTimeout &&
		a.BreakerHalfOpenProbes == b.BreakerHalfOpenProbes
}

// Judge says how a breaker counts err, the error of the send function
// given to Execute (and passed on by it): nil is a success; ErrFailedStatus
// or an [Attempt] not excluded is a failure; anything else is excluded.
// It does not allocate.
func Judge(err error) observe.Verdict {
	switch {
	case err == nil:
		return observe.VerdictSuccess
	case err == ErrFailedStatus:
		return observe.VerdictFailure
	}
	// send returns *Attempt unwrapped; a type assertion costs no
	// allocation on every attempt, unlike errors.As.
	if ae, ok := err.(*Attempt); ok && !ae.Excluded {
		return observe.VerdictFailure
	}
	return observe.VerdictExcluded
}

// ErrFailedStatus marks an attempt that got a response the breaker counts as
// a failure. The response travels with it.
var ErrFailedStatus = errors.New("failed status")

// Attempt carries a failed attempt's error through the breaker with its
// op, and whether the breaker excludes it (neither a success nor a
// failure).
type Attempt struct {
	Op       observe.Op
	Excluded bool
	Err      error
}

func (e *Attempt) Error() string { return e.Err.Error() }
func (e *Attempt) Unwrap() error { return e.Err }

// MinFairAttempt is the least time an attempt must have had before the
// caller's deadline cut it for the cut to count against the upstream. An
// attempt cut sooner never had a chance and is excluded; one cut later is
// an attempt timeout like any other, so a hung upstream still opens the
// breaker when every caller brings a short budget.
const MinFairAttempt = 100 * time.Millisecond

// Excluded reports whether an attempt that failed with op, having had
// avail before its deadline (-1: none), is neither a success nor a
// failure: what the table of ops says (the caller cancelled, the request
// was bad before any I/O, the attempt was refused), or the caller's
// budget left the attempt no fair chance.
func Excluded(op observe.Op, avail time.Duration) bool {
	if op == observe.OpBudgetTimeout {
		return avail >= 0 && avail < MinFairAttempt
	}
	return op.Verdict() == observe.VerdictExcluded
}

// State names a gobreaker state as Status and the observers do.
func State(s gobreaker.State) observe.BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return observe.BreakerOpen
	case gobreaker.StateHalfOpen:
		return observe.BreakerHalfOpen
	}
	return observe.BreakerClosed
}

// refusal is the cause of an attempt or a call the breaker refused. Its
// values are immutable (no exported field), so every call can share them.
type refusal struct {
	state error
	msg   string
}

// The causes of the breaker's refusals: open, half-open with every probe
// taken, or forced open by an operator. Each matches [ErrOpen] and wraps
// gobreaker's error.
var (
	Open       error = &refusal{gobreaker.ErrOpenState, "breaker open"}
	ProbesBusy error = &refusal{gobreaker.ErrTooManyRequests, "half-open, every probe taken"}
	ForcedOpen error = &refusal{gobreaker.ErrOpenState, "an operator forced the breaker open"}
)

func (r *refusal) Error() string { return r.msg }

// Is makes the refusal match ErrOpen; Unwrap, gobreaker's error. Neither
// allocates.
func (r *refusal) Is(target error) bool { return target == ErrOpen }
func (r *refusal) Unwrap() error        { return r.state }
