// Package ratelimit is a system's quota of requests (RATE_LIMIT,
// RATE_BURST, RATE_MAX_WAIT) at scope local: a token bucket
// (golang.org/x/time/rate) that every request leaving for the upstream
// takes a token of, and a pause the upstream can ask for (Retry-After on
// a 429 or 503, or its rate-limit headers saying nothing is left). It is
// internal: registry.Quota is its public face, and module fleet gives the
// same seam a share of the fleet's quota (its own bucket, in the fleet
// module: no other module imports this package).
package ratelimit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
	"golang.org/x/time/rate"
)

// ErrLimited is the cause of a request the quota refused: no token in
// time, or the system paused by the upstream past the wait allowed.
// registry.ErrRateLimited is it.
var ErrLimited = errors.New("outbound: rate limited")

// Local is one system's own quota. It is safe for concurrent use.
type Local struct {
	r      atomic.Pointer[config.Rate]
	lim    *rate.Limiter
	paused atomic.Int64 // until when, Unix nanoseconds; 0: not paused
}

// NewLocal returns the quota of r, which must be limited.
func NewLocal(r config.Rate) *Local {
	l := &Local{lim: rate.NewLimiter(rate.Limit(r.PerSecond()), r.Burst)}
	l.r.Store(&r)
	return l
}

// SetRate changes the quota to r, which must be limited, keeping the
// tokens it has (at most r's burst): a change of settings neither
// refills the bucket nor empties it.
func (l *Local) SetRate(r config.Rate) {
	l.lim.SetLimit(rate.Limit(r.PerSecond()))
	l.lim.SetBurst(r.Burst)
	l.r.Store(&r)
}

// Wait takes one token, waiting at most maxWait and never past ctx's
// deadline: nil, or ErrLimited when no token (or no end of a pause) comes
// in time, or ctx's error when ctx ends first. A token at hand costs no
// allocation; a wait costs one (x/time/rate's reservation).
func (l *Local) Wait(ctx context.Context, maxWait time.Duration) error {
	if err := WaitPause(ctx, &l.paused, maxWait); err != nil {
		return err
	}
	if l.lim.Allow() {
		return nil
	}
	if maxWait <= 0 {
		return ErrLimited
	}
	now := time.Now()
	res := l.lim.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if !res.OK() || d > maxWait || pastDeadline(ctx, now.Add(d)) {
		res.CancelAt(now)
		return ErrLimited
	}
	if !policy.Sleep(ctx, d) {
		res.Cancel()
		return ctx.Err()
	}
	return nil
}

// Pause stops every request until until; a shorter pause than the one
// in force changes nothing.
func (l *Local) Pause(until time.Time) { Extend(&l.paused, until) }

// ReportPauses does nothing: a local quota learns of no pause but its
// own pod's (registry.Quota).
func (l *Local) ReportPauses(func(until time.Time)) {}

// Status is the quota's state: its limit, the share this pod may spend
// (all of it, at scope local), the tokens left now and the pause.
func (l *Local) Status() observe.RateStatus {
	r := l.r.Load()
	st := observe.RateStatus{Limit: r.String(), Scope: "local", Share: r.PerSecond(), Burst: r.Burst,
		Tokens: l.lim.Tokens()}
	if p := l.paused.Load(); p > time.Now().UnixNano() {
		st.PausedUntil = time.Unix(0, p)
	}
	return st
}

// Extend sets *paused to until (Unix nanoseconds) unless it holds a
// later time already.
func Extend(paused *atomic.Int64, until time.Time) {
	u := until.UnixNano()
	for {
		cur := paused.Load()
		if cur >= u || paused.CompareAndSwap(cur, u) {
			return
		}
	}
}

// WaitPause waits out the pause in *paused when it ends within maxWait
// and before ctx's deadline, and otherwise refuses at once with
// ErrLimited; ctx's error when ctx ends first.
func WaitPause(ctx context.Context, paused *atomic.Int64, maxWait time.Duration) error {
	p := paused.Load()
	if p == 0 {
		return nil
	}
	now := time.Now()
	d := time.Duration(p - now.UnixNano())
	switch {
	case d <= 0:
		return nil
	case d > maxWait || pastDeadline(ctx, now.Add(d)):
		return ErrLimited
	case !policy.Sleep(ctx, d):
		return ctx.Err()
	}
	return nil
}

// pastDeadline reports whether t is past ctx's deadline.
func pastDeadline(ctx context.Context, t time.Time) bool {
	dl, ok := ctx.Deadline()
	return ok && t.After(dl)
}
