package registry

import (
	"context"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/sony/gobreaker/v2"
)

// hedgeStage sends an attempt of a replayable request as a race of
// copies: one more each delay without an answer (a
// fixed HEDGE_DELAY or a percentile of recent answers), HEDGE_MAX at
// most, each paid with a retry-throttle token and a bulkhead permit taken
// without waiting, and only while the breaker is closed. The first answer
// the caller should see wins; the others are cancelled, their bodies
// closed and their permits given back before the stage returns. When
// every copy fails, the last failure is the attempt's, for the retry
// stage to judge. It tells the observers of each copy. It is in the
// chain when HEDGE_DELAY is set.
type hedgeStage struct {
	c      *Client
	cb     Circuit // the policy's breaker: no hedge unless it is closed
	policy *hedgePolicy
	next   attemptStage
}

func (s *hedgeStage) send(a *attempt) {
	if !a.call.replayable {
		// Never hedged: sent once, told as a plain attempt.
		a.t0 = time.Now()
		s.next.send(a)
		a.took = time.Since(a.t0)
		s.c.report(a, hedgeTag{})
		return
	}
	r := &racer{s: s, a: a, reqs: make([]*http.Request, 1+s.policy.max)}
	r.reqs[0] = a.req
	end, k, final := r.race(a.req.Context())
	s.c.releaseHedges(r.sent)
	if final && k > 0 {
		s.c.stats.hedgesWon.Add(1)
	}
	s.c.report(&end.attempt, hedgeTag{k: k, won: final && r.sent > 0})
	a.req, a.resp, a.op, a.err = end.req, end.resp, end.op, end.err
}

// racer runs the race of one attempt's copies: their requests, by copy
// number (each written before its copy goes, by the race's goroutine),
// the hedges sent, and the copies in flight.
type racer struct {
	s    *hedgeStage
	a    *attempt
	reqs []*http.Request
	sent int

	results chan copyEnd
	cancels []context.CancelFunc // of each copy, by copy number
	pending int                  // copies in flight
}

// copyEnd is how copy k ended.
type copyEnd struct {
	c *copyResult
	k int
}

// How a copy that is not the attempt's end took part in a race.
const (
	copyFailed = false // it failed, and another copy's end is the attempt's
	copyLost   = true  // it was cancelled: another copy won
)

// race sends the copies of one attempt: the first at once and, each
// delay of the policy without an answer the caller should see, one more
// (HEDGE_MAX at most) while the racer pays for it (hedge). The first
// final copy wins; the others are cancelled and waited for. When every
// copy fails, the last failure is the attempt's end (final is false). It
// returns that end and its copy's number once every copy has ended, each
// other copy told (took).
func (r *racer) race(ctx context.Context) (end *copyResult, k int, final bool) {
	p := r.s.policy
	r.results = make(chan copyEnd, 1+p.max)
	r.launch(ctx, 0)
	timer := time.NewTimer(p.delay())
	defer timer.Stop()
	var last *copyEnd // the last failure, while copies are in flight
	for r.pending > 0 {
		select {
		case <-timer.C:
			if r.sent < p.max && r.hedge() {
				r.launch(ctx, r.sent)
				timer.Reset(p.delay())
			}
		case res := <-r.results:
			r.pending--
			p.record(res.c.resp != nil, res.c.took)
			if res.c.final() {
				r.settle(res, last)
				return res.c, res.k, true
			}
			if res.c.refused() && res.k > 0 {
				r.took(res.c, res.k, copyFailed) // a hedge refused: no I/O, not the answer
				continue
			}
			if last != nil {
				r.took(last.c, last.k, copyFailed)
			}
			last = &res
		}
	}
	return last.c, last.k, false
}

func (r *racer) launch(parent context.Context, k int) {
	ctx, cancel := context.WithCancel(parent)
	r.cancels = append(r.cancels, cancel)
	r.pending++
	go func() { r.results <- copyEnd{r.send(ctx, k), k} }()
}

// settle ends the race on w: the other copies are cancelled and waited
// for, and each is told, the earlier failure first.
func (r *racer) settle(w copyEnd, last *copyEnd) {
	for k, cancel := range r.cancels {
		if k != w.k {
			cancel()
		}
	}
	if last != nil {
		r.took(last.c, last.k, copyFailed)
	}
	for ; r.pending > 0; r.pending-- {
		res := <-r.results
		r.took(res.c, res.k, copyLost)
	}
}

// copyResult is one copy of a hedged attempt.
type copyResult struct{ attempt }

// send sends copy k (0 the first) under ctx, which the race cancels when
// another copy wins. It runs on a goroutine of its own.
func (r *racer) send(ctx context.Context, k int) *copyResult {
	res := &copyResult{}
	res.reset(r.reqs[k].WithContext(ctx), r.a.n, r.a.last)
	res.call = r.a.call
	res.t0 = time.Now()
	r.s.next.send(&res.attempt)
	res.took = time.Since(res.t0)
	return res
}

// hedge takes what one hedge costs (mayHedge) and copies the request, or
// gives the price back when the body cannot be produced again; false:
// none may go now.
func (r *racer) hedge() bool {
	c := r.s.c
	if !c.mayHedge(r.s.cb) {
		return false
	}
	req, ok := copyRequest(r.a.req)
	if !ok {
		c.releaseHedges(1)
		c.retryBudget.Refund()
		return false
	}
	c.stats.hedges.Add(1)
	r.sent++
	r.reqs[r.sent] = req
	return true
}

// took tells how copy k, c, took part, once the race knows; it is not
// the attempt's end, so its response is closed here.
func (r *racer) took(c *copyResult, k int, lost bool) {
	if c.resp != nil {
		drainResponse(c.resp) // a cancelled copy costs its connection
	}
	r.s.c.report(&c.attempt, hedgeTag{k: k, lost: lost})
}

// final reports whether the caller should see the copy as it is: a
// response that is not temporary, or an error no other copy can cure
// (the call's deadline, the caller, a bad request).
func (c *copyResult) final() bool {
	if c.err == nil {
		return !policy.TemporaryStatus(c.resp.StatusCode)
	}
	return !c.op.Retryable() && !c.refused()
}

// refused reports whether the copy was refused with no I/O (by the
// breaker or the rate limit).
func (c *copyResult) refused() bool { return c.err != nil && c.op.Outcome(false).Refused() }

// mayHedge takes what one hedge costs: a closed breaker (never a second
// copy while it is half-open), a bulkhead permit and a retry-throttle
// token, none of them waited for. It reports whether the hedge may go.
func (c *Client) mayHedge(cb Circuit) bool {
	if cb.State() != gobreaker.StateClosed || !c.bh.TryAcquire() {
		return false
	}
	if !c.retryBudget.Retry(time.Now()) {
		_ = c.bh.Release()
		return false
	}
	return true
}

// releaseHedges gives back the bulkhead permits of n hedges.
func (c *Client) releaseHedges(n int) {
	for range n {
		_ = c.bh.Release()
	}
}

// The percentile delay is computed over the last hedgeWindow answers, once
// hedgeMinSamples have come in and again every hedgeRecompute answers.
const (
	hedgeWindow     = 256
	hedgeMinSamples = 20
	hedgeRecompute  = 16
)

// hedgePolicy is one system's hedging policy: how many copies, and when. A
// fixed HEDGE_DELAY is the delay; a percentile is computed from the
// response times of the system's recent attempts (every copy that got
// response headers; a copy cancelled because another won is not counted)
// and kept between HEDGE_DELAY_MIN and HEDGE_DELAY_MAX (or READ_TIMEOUT,
// if sooner). Until hedgeMinSamples answers have come in, the delay is
// the ceiling. It is safe for concurrent use.
type hedgePolicy struct {
	max        int // copies beside one attempt, at most
	fixed      time.Duration
	percentile float64 // 0 for a fixed delay
	floor, top time.Duration

	mu      sync.Mutex
	window  [hedgeWindow]time.Duration
	n       uint64
	current atomic.Int64 // the percentile delay, clamped
}

// newHedgePolicy returns the system's hedging policy, or nil when it
// does not hedge (HEDGE_DELAY=0). c was validated: HEDGE_DELAY parses.
func newHedgePolicy(c config.Client) *hedgePolicy {
	fixed, pct, err := config.ParseHedgeDelay(c.HedgeDelay)
	if err != nil || (fixed == 0 && pct == 0) {
		return nil
	}
	h := &hedgePolicy{max: c.HedgeMax, fixed: fixed, percentile: pct,
		floor: c.HedgeDelayMin, top: min(c.HedgeDelayMax, c.ReadTimeout)}
	h.floor = min(h.floor, h.top)
	h.current.Store(int64(h.top))
	return h
}

// delay is how long a copy waits for an answer before the next one goes.
func (h *hedgePolicy) delay() time.Duration {
	if h.fixed > 0 {
		return h.fixed
	}
	return time.Duration(h.current.Load())
}

// record notes the response time of a copy that got response headers,
// for a percentile delay; a copy with no response (answered false) is not
// counted.
func (h *hedgePolicy) record(answered bool, took time.Duration) {
	if h.percentile == 0 || !answered {
		return
	}
	h.mu.Lock()
	h.window[h.n%hedgeWindow] = took
	h.n++
	if h.n >= hedgeMinSamples && (h.n == hedgeMinSamples || h.n%hedgeRecompute == 0) {
		h.current.Store(int64(h.percentileLocked()))
	}
	h.mu.Unlock()
}

// percentileLocked is the nearest-rank percentile of the window,
// clamped to the floor and the ceiling.
func (h *hedgePolicy) percentileLocked() time.Duration {
	s := slices.Clone(h.window[:min(h.n, hedgeWindow)])
	slices.Sort(s)
	rank := int(math.Ceil(h.percentile / 100 * float64(len(s))))
	return min(max(s[max(rank, 1)-1], h.floor), h.top)
}
