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

// hedgeStage sends an attempt of a replayable request through the next
// stage and, each delay it waits without an answer (internal/hedge: a
// fixed HEDGE_DELAY or a percentile of recent answers), one more copy
// (HEDGE_MAX at most), each paid with a retry-throttle token and a
// bulkhead permit taken without waiting, and only while the breaker is
// closed. The first answer the caller should see wins; the others are
// cancelled, and the stage returns once every copy has ended, their
// bodies closed and their permits given back. When every copy fails, the
// last failure is the attempt's, for the retry stage to judge. It tells
// the observers of each copy. It is in the chain when HEDGE_DELAY is set.
type hedgeStage struct {
	c      *Client
	policy *hedge.Policy
	next   attemptStage
}

// race is one hedged attempt: its copies in flight and how they ended.
type race struct {
	s        *hedgeStage
	a        *attempt             // the attempt hedged; the winner's result goes in it
	results  chan *copyResult     // each copy's, as it ends
	cancels  []context.CancelFunc // of each copy, by copy number
	sent     int                  // hedges sent, each holding a permit
	pending  int                  // copies in flight
	lastFail *copyResult          // the last failure, while copies are in flight
}

// copyResult is one copy of a hedged attempt.
type copyResult struct {
	attempt
	k int // 0: the first copy; 1..HEDGE_MAX: the hedges
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
	r := &race{s: s, a: a, results: make(chan *copyResult, 1+s.policy.Max())}
	r.launch(0, a.req)
	timer := time.NewTimer(s.policy.Delay())
	defer timer.Stop()
	for r.pending > 0 {
		select {
		case <-timer.C:
			if r.sent < s.policy.Max() && s.c.mayHedge() {
				r.hedge()
				timer.Reset(s.policy.Delay())
			}
		case res := <-r.results:
			r.pending--
			s.policy.Record(res.resp != nil, res.took)
			if r.final(res) {
				r.settle(res)
				return
			}
			r.failed(res)
		}
	}
	// Every copy failed: the last failure is the attempt's.
	s.c.releaseHedges(r.sent)
	s.c.report(&r.lastFail.attempt, hedgeTag{k: r.lastFail.k})
	r.a.resp, r.a.op, r.a.err = r.lastFail.resp, r.lastFail.op, r.lastFail.err
}

// launch sends copy k of the attempt, with req, on a goroutine of its
// own, under a context the race can cancel.
func (r *race) launch(k int, req *http.Request) {
	ctx, cancel := context.WithCancel(req.Context())
	r.cancels = append(r.cancels, cancel)
	res := &copyResult{k: k}
	res.reset(req.WithContext(ctx), r.a.n, r.a.last)
	res.call = r.a.call
	r.pending++
	go func() {
		res.t0 = time.Now()
		r.s.next.send(&res.attempt)
		res.took = time.Since(res.t0)
		r.results <- res
	}()
}

// hedge sends the next copy, paid for already (mayHedge), or gives its
// price back when the body cannot be produced again.
func (r *race) hedge() {
	req, ok := request.Copy(r.a.req)
	if !ok {
		r.s.c.releaseHedges(1)
		r.s.c.throttle.Refund()
		return
	}
	r.sent++
	r.s.c.stats.hedges.Add(1)
	r.launch(r.sent, req)
}

// final reports whether the caller should see res as it is: a response
// that is not temporary, or an error no other copy can cure (the call's
// deadline, the caller, a bad request). A temporary failure waits for the
// copies still in flight.
func (r *race) final(res *copyResult) bool {
	if res.err == nil {
		return !policy.TemporaryStatus(res.resp.StatusCode)
	}
	return !res.op.Retryable() && !res.op.Outcome(false).Refused()
}

// failed keeps res, a copy's temporary failure, as the race's last; a
// hedge the breaker refused (no I/O) is told and dropped.
func (r *race) failed(res *copyResult) {
	if res.err != nil && res.op.Outcome(false).Refused() && res.k > 0 {
		r.s.c.report(&res.attempt, hedgeTag{k: res.k})
		return
	}
	if f := r.lastFail; f != nil {
		r.s.c.report(&f.attempt, hedgeTag{k: f.k})
		if f.resp != nil {
			drain.Response(f.resp)
		}
	}
	r.lastFail = res
}

// settle ends the race on its winner w: the copies still in flight are
// cancelled and waited for, their responses closed (a cancelled copy
// costs its connection), an earlier failure's response drained, the
// hedges' permits given back, and the observers told of every copy.
func (r *race) settle(w *copyResult) {
	c := r.s.c
	for k, cancel := range r.cancels {
		if k != w.k {
			cancel()
		}
	}
	if f := r.lastFail; f != nil {
		if f.resp != nil {
			drain.Response(f.resp)
		}
		c.report(&f.attempt, hedgeTag{k: f.k})
	}
	for ; r.pending > 0; r.pending-- {
		res := <-r.results
		if res.resp != nil {
			drain.Response(res.resp)
		}
		c.report(&res.attempt, hedgeTag{k: res.k, lost: true})
	}
	c.releaseHedges(r.sent)
	if w.k > 0 {
		c.stats.hedgesWon.Add(1)
	}
	c.report(&w.attempt, hedgeTag{k: w.k, won: r.sent > 0})
	r.a.req, r.a.resp, r.a.op, r.a.err = w.req, w.resp, w.op, w.err
}

// mayHedge takes what one hedge costs: a closed breaker (never a second
// copy while it is half-open), a bulkhead permit and a retry-throttle
// token, none of them waited for. It reports whether the hedge may go.
func (c *Client) mayHedge() bool {
	if c.cb.State() != gobreaker.StateClosed || !c.bh.TryAcquire() {
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
