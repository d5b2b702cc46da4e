package registry

import (
	"time"

	"github.com/outbound-go/outbound/internal/ratelimit"
	"github.com/outbound-go/outbound/observe"
)

// rateStage takes a token of the system's [Quota] for every request that
// leaves for the upstream, inside the breaker (so a half-open probe pays
// too, and a request the breaker refuses pays nothing): it waits at most
// RATE_MAX_WAIT and never past the call's deadline, or refuses with no
// I/O ([ErrRateLimited]; the breaker excludes it). It reads the
// upstream's word on every response (a 429 or 503 with Retry-After, or
// rate-limit headers that say nothing is left) and pauses the quota,
// bounded by CALL_TIMEOUT; only BASE_URL's origin speaks for the system,
// so a host a redirect led to (FOLLOW_REDIRECTS=any) pauses nothing. It
// is in the chain when RATE_LIMIT is set.
type rateStage struct {
	c *Client
	q Quota
	// upstream: this is the system's quota, which the upstream's word
	// pauses; a route's own limit is only spent.
	upstream bool
	next     attemptStage
}

func (s *rateStage) send(a *attempt) {
	ctx := a.req.Context()
	if err := s.q.Wait(ctx, a.call.route.cfg.RateMaxWait); err != nil {
		closeBody(a.req)
		a.err = err
		a.op = observe.OpRateLimit
		if ctx.Err() != nil {
			a.op = classify(ctx, err)
		} else {
			s.c.stats.rateRefused.Add(1)
		}
		return
	}
	s.next.send(a)
	if a.resp == nil || !s.upstream {
		return
	}
	if d, ok := ratelimit.PauseFrom(a.resp, time.Now(), a.call.route.cfg.CallTimeout); ok && sameOrigin(a.req.URL, s.c.base) {
		until := time.Now().Add(d)
		s.c.paused(until, a.resp.StatusCode) // first: the fleet's echo is then old news
		s.q.Pause(until)
	}
}

// paused tells the observers of a pause the upstream asked for (status
// 0: another pod's), unless one told is still in force (a burst of 429s
// is one pause).
func (c *Client) paused(until time.Time, status int) {
	for {
		shown := c.pausedTill.Load()
		if time.Now().UnixNano() < shown {
			return
		}
		if c.pausedTill.CompareAndSwap(shown, until.UnixNano()) {
			break
		}
	}
	each(c.observers, func(po observe.PauseObserver) { po.ObservePause(c.name, until, status) })
}
