package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
	"golang.org/x/time/rate"
)

// share is one pod's share of a quota that several pods share: a token
// bucket (golang.org/x/time/rate) whose rate and burst are set from
// outside as the share changes ([share.SetRate]), a pause, and the
// counts of what the pod's requests asked for ([share.Demand]), for
// whoever hands out the shares to weigh. It never talks to anyone: a
// request costs what it costs at scope local.
//
// Waiting requests do not each reserve a token ahead (x/time/rate's
// reservations would keep the old rate for as long as the longest wait
// after a cut, and repay their debt at the new one): they take turns,
// first come first served, and only the one whose turn it is reserves
// the next token and sleeps until it is due. A new rate cancels that one
// reservation ([share.SetRate]): it binds every request from the moment
// it is set, and a token costs one wake-up, not one per waiting request.
//
// A share is safe for concurrent use.
type share struct {
	limit   string // as RATE_LIMIT spells it, for Status
	scope   string
	lim     atomic.Pointer[rate.Limiter]  // replaced once, by the first rate
	paused  atomic.Int64                  // until when, Unix nanoseconds; 0: not paused
	ends    atomic.Int64                  // when the rate set ends (SetEnd), Unix nanoseconds; 0: it does not
	asked   atomic.Uint64                 // Wait calls since the last Demand
	waiting atomic.Int64                  // requests waiting for a token now
	changed atomic.Pointer[chan struct{}] // closed when the rate changes
	turn    chan struct{}                 // held by the waiting request whose turn it is

	mu      sync.Mutex
	perSec  float64           // the rate now
	burst   int               // the burst now
	held    *rate.Reservation // the token reserved for the request whose turn it is
	started bool              // the share has had a rate
}

// newShare returns a share of the quota limit (as RATE_LIMIT spells it,
// for Status) at scope, with no rate yet: every request waits or is
// refused until [share.SetRate] gives one. The first rate starts with a
// full bucket, as a local quota does; later ones keep the tokens at hand
// (up to the new burst).
func newShare(limit, scope string) *share {
	s := &share{limit: limit, scope: scope, turn: make(chan struct{}, 1)}
	s.lim.Store(rate.NewLimiter(0, 0))
	s.turn <- struct{}{}
	ch := make(chan struct{})
	s.changed.Store(&ch)
	return s
}

// Wait takes one token, waiting at most maxWait and never past ctx's
// deadline: nil, or registry.ErrRateLimited when no token (or no end of a pause) comes
// in time, or ctx's error when ctx ends first. A token at hand costs no
// allocation. A request whose token would come after the wait allowed,
// at the rate now and behind the requests already waiting, is refused at
// once; with no rate at all (no share yet) it waits for one, up to
// maxWait.
func (s *share) Wait(ctx context.Context, maxWait time.Duration) error {
	s.asked.Add(1)
	if err := waitPause(ctx, &s.paused, maxWait); err != nil {
		return err
	}
	// One reading of the clock for the end and the token.
	if now := time.Now(); !s.endedAt(now) && s.lim.Load().AllowN(now, 1) {
		return nil
	}
	if maxWait <= 0 {
		return registry.ErrRateLimited
	}
	end := time.Now().Add(maxWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	return s.wait(ctx, end)
}

// wait waits for a token until end, in line: the waiting requests take
// turns (first come, first served), and only the one whose turn it is
// sleeps until a token is due at the rate now, or until the rate
// changes. A request refuses at once when the tokens for those ahead of
// it and its own cannot come in time at the rate now.
func (s *share) wait(ctx context.Context, end time.Time) error {
	now := time.Now()
	if d := s.until(now, float64(s.waiting.Load())); d != rate.InfDuration && d > end.Sub(now) {
		return registry.ErrRateLimited
	}
	t := time.NewTimer(end.Sub(now))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return registry.ErrRateLimited
	case <-s.turn:
	}
	defer func() { s.turn <- struct{}{} }()
	for {
		changed := *s.changed.Load()
		left := time.Until(end)
		if left <= 0 {
			return registry.ErrRateLimited
		}
		res, at, err := s.reserve(left)
		switch {
		case err != nil:
			return err
		case res == nil: // no rate: wait for one
			if err := sleepOrChange(ctx, left, changed); err != nil {
				return err
			}
			continue
		case at > 0:
			if err := sleepOrChange(ctx, at, changed); err != nil {
				s.unhold(res, true)
				return err
			}
			if !s.unhold(res, false) {
				continue // the rate changed: SetRate cancelled it
			}
		}
		// A pause may have begun while this request waited.
		return waitPause(ctx, &s.paused, time.Until(end))
	}
}

// reserve reserves the next token for the request whose turn it is, and
// holds the reservation until it is due (SetRate cancels it): nil when
// there is no rate, registry.ErrRateLimited when the token comes later than left.
// Holding one token ahead keeps the bucket from filling up while the
// request wakes: a request that wakes late loses no token.
func (s *share) reserve(left time.Duration) (*rate.Reservation, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended() {
		return nil, 0, nil // no rate until the next is set
	}
	now := time.Now()
	res := s.lim.Load().ReserveN(now, 1)
	if !res.OK() {
		return nil, 0, nil
	}
	at := res.DelayFrom(now)
	if at > left {
		res.CancelAt(now)
		return nil, 0, registry.ErrRateLimited
	}
	if at > 0 {
		s.held = res
	}
	return res, at, nil
}

// unhold lets go of res, cancelling it when cancel is set; it reports
// whether res was still held (SetRate did not cancel it).
func (s *share) unhold(res *rate.Reservation, cancel bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != res {
		return false
	}
	s.held = nil
	if cancel {
		res.Cancel()
	}
	return true
}

// until is how long until n tokens are at hand at the rate now,
// rate.InfDuration when there is no rate.
func (s *share) until(now time.Time, n float64) time.Duration {
	lim := s.lim.Load()
	tokens := lim.TokensAt(now)
	if tokens >= n {
		return 0
	}
	r := float64(lim.Limit())
	if r <= 0 || lim.Burst() < 1 {
		return rate.InfDuration
	}
	return time.Duration((n - tokens) / r * float64(time.Second))
}

// sleepOrChange sleeps d, or until changed is closed: nil, or ctx's
// error when ctx ends first.
func sleepOrChange(ctx context.Context, d time.Duration, changed <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-t.C:
	}
	return nil
}

// SetRate sets the share's rate (requests per second) and burst, from
// now on. Tokens at hand above the new burst are dropped; requests
// waiting for a token look again.
func (s *share) SetRate(perSec float64, burst int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if perSec == s.perSec && burst == s.burst {
		return
	}
	now := time.Now()
	if s.held != nil {
		// Reserved at the old rate: the request reserves again at the new
		// one. No token was taken since (the reservation made the tokens
		// negative until it is due), so it gives back exactly its own.
		s.held.CancelAt(now)
		s.held = nil
	}
	if !s.started && perSec > 0 && burst > 0 {
		// The first rate: the bucket starts full, as a local quota's.
		s.started = true
		s.lim.Store(rate.NewLimiter(rate.Limit(perSec), burst))
	}
	s.perSec, s.burst = perSec, burst
	lim := s.lim.Load()
	lim.SetLimitAt(now, rate.Limit(perSec))
	lim.SetBurstAt(now, burst)
	next := make(chan struct{})
	close(*s.changed.Swap(&next))
}

// SetEnd makes the rate set end at end (zero: it does not end): from
// then on the share sends nothing, as before its first rate, until a rate
// or an end is set again. A grant ends by itself when its time is up,
// even if whoever sets the next one (the fleet's loop, on a starved
// machine) runs late. Requests waiting for a token look again.
func (s *share) SetEnd(end time.Time) {
	var ns int64
	if !end.IsZero() {
		ns = end.UnixNano()
	}
	if s.ends.Swap(ns) == ns {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(chan struct{})
	close(*s.changed.Swap(&next))
}

// ended reports whether the rate set has ended (SetEnd).
func (s *share) ended() bool { return s.endedAt(time.Now()) }

// endedAt reports whether the rate set had ended at now.
func (s *share) endedAt(now time.Time) bool {
	e := s.ends.Load()
	return e != 0 && now.UnixNano() >= e
}

// Rate returns the share's rate (requests per second) and burst: zero
// once the rate set has ended.
func (s *share) Rate() (perSec float64, burst int) {
	if s.ended() {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perSec, s.burst
}

// Demand returns the requests that asked for a token since the last
// Demand (taken, waited for or refused) and those waiting for one now.
func (s *share) Demand() (asked uint64, waiting int64) {
	return s.asked.Swap(0), s.waiting.Load()
}

// Pause stops every request until until; a shorter pause than the one
// in force changes nothing.
func (s *share) Pause(until time.Time) { extendPause(&s.paused, until) }

// PausedUntil is when the pause in force ends; zero when none is.
func (s *share) PausedUntil() time.Time {
	if p := s.paused.Load(); p > time.Now().UnixNano() {
		return time.Unix(0, p)
	}
	return time.Time{}
}

// Status is the share's state: the quota's limit and scope, the share's
// rate and burst, the tokens at hand and the pause. Synced is left to
// the caller.
func (s *share) Status() observe.RateStatus {
	perSec, burst := s.Rate()
	tokens := 0.0
	if !s.ended() {
		tokens = max(0, s.lim.Load().Tokens())
	}
	return observe.RateStatus{Limit: s.limit, Scope: s.scope, Share: perSec, Burst: burst,
		Tokens: tokens, PausedUntil: s.PausedUntil()}
}

// extendPause sets *paused to until (Unix nanoseconds) unless it holds a
// later time already.
func extendPause(paused *atomic.Int64, until time.Time) {
	u := until.UnixNano()
	for {
		cur := paused.Load()
		if cur >= u || paused.CompareAndSwap(cur, u) {
			return
		}
	}
}

// waitPause waits out the pause in *paused when it ends within maxWait
// and before ctx's deadline, and otherwise refuses at once with
// registry.ErrRateLimited; ctx's error when ctx ends first.
func waitPause(ctx context.Context, paused *atomic.Int64, maxWait time.Duration) error {
	p := paused.Load()
	if p == 0 {
		return nil
	}
	now := time.Now()
	d := time.Duration(p - now.UnixNano())
	if d <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); d > maxWait || ok && now.Add(d).After(dl) {
		return registry.ErrRateLimited
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
