package registry

import (
	"context"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/internal/drain"
	"github.com/outbound-go/outbound/internal/hedge"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/internal/request"
	"github.com/sony/gobreaker/v2"
)

// hedgeStage sends an attempt of a replayable request as a race of
// copies (internal/hedge): one more each delay without an answer (a
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
	policy *hedge.Policy
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
	r := &racer{s: s, a: a, reqs: make([]*http.Request, 1+s.policy.Max())}
	r.reqs[0] = a.req
	end, k, final := hedge.Race[*copyResult](a.req.Context(), s.policy, r)
	s.c.releaseHedges(r.sent)
	if final && k > 0 {
		s.c.stats.hedgesWon.Add(1)
	}
	s.c.report(&end.attempt, hedgeTag{k: k, won: final && r.sent > 0})
	a.req, a.resp, a.op, a.err = end.req, end.resp, end.op, end.err
}

// racer is the hedge stage's side of one race: the requests of the
// copies, by copy number (each written before its copy goes, by the
// race's goroutine), and the hedges sent.
type racer struct {
	s    *hedgeStage
	a    *attempt
	reqs []*http.Request
	sent int
}

// copyResult is one copy of a hedged attempt.
type copyResult struct{ attempt }

func (r *racer) Send(ctx context.Context, k int) *copyResult {
	res := &copyResult{}
	res.reset(r.reqs[k].WithContext(ctx), r.a.n, r.a.last)
	res.call = r.a.call
	res.t0 = time.Now()
	r.s.next.send(&res.attempt)
	res.took = time.Since(res.t0)
	return res
}

// Hedge takes what one hedge costs (mayHedge) and copies the request, or
// gives the price back when the body cannot be produced again.
func (r *racer) Hedge() bool {
	c := r.s.c
	if !c.mayHedge(r.s.cb) {
		return false
	}
	req, ok := request.Copy(r.a.req)
	if !ok {
		c.releaseHedges(1)
		c.throttle.Refund()
		return false
	}
	c.stats.hedges.Add(1)
	r.sent++
	r.reqs[r.sent] = req
	return true
}

func (r *racer) Took(c *copyResult, k int, how hedge.How) {
	if c.resp != nil {
		drain.Response(c.resp) // a cancelled copy costs its connection
	}
	r.s.c.report(&c.attempt, hedgeTag{k: k, lost: how == hedge.Lost})
}

// Final is a response that is not temporary, or an error no other copy
// can cure (the call's deadline, the caller, a bad request).
func (c *copyResult) Final() bool {
	if c.err == nil {
		return !policy.TemporaryStatus(c.resp.StatusCode)
	}
	return !c.op.Retryable() && !c.Refused()
}

func (c *copyResult) Refused() bool { return c.err != nil && c.op.Outcome(false).Refused() }

func (c *copyResult) Answered() (bool, time.Duration) { return c.resp != nil, c.took }

// mayHedge takes what one hedge costs: a closed breaker (never a second
// copy while it is half-open), a bulkhead permit and a retry-throttle
// token, none of them waited for. It reports whether the hedge may go.
func (c *Client) mayHedge(cb Circuit) bool {
	if cb.State() != gobreaker.StateClosed || !c.bh.TryAcquire() {
		return false
	}
	if !c.throttle.Retry(time.Now()) {
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
