package registry

import (
	"context"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
)

// hedgeResult is how one copy of a hedged attempt ended.
type hedgeResult struct {
	k    int // 0: the first copy; 1..HEDGE_MAX: the hedges
	req  *http.Request
	resp *http.Response
	op   observe.Op
	err  error
	t0   time.Time     // when the copy went
	took time.Duration // until it ended
}

// final reports whether the caller should see r as it is: a response
// that is not temporary, or an error no other copy can cure (the call's
// deadline, the caller, a bad request). A temporary failure waits for the
// copies still in flight.
func (r *hedgeResult) final() bool {
	if r.err == nil {
		return !policy.TemporaryStatus(r.resp.StatusCode)
	}
	return !retryableOp(r.op)
}

// hedge is the hedge stage of attempt n, for a request that is safe to
// send twice: it sends the attempt through the breaker stage and, each
// HEDGE_DELAY it waits without an answer, one more copy (HEDGE_MAX at
// most), each paid with a retry-budget token and a bulkhead permit taken
// without waiting, and only while the breaker is closed. The first answer
// the caller should see wins; the others are cancelled, and the stage
// returns once every copy has ended, their bodies closed and their
// permits given back. When every copy fails, the last failure is the
// attempt's, for the retry stage to judge.
func (c *Client) hedge(req *http.Request, n int, last bool) (*http.Response, observe.Op, error) {
	h := c.hedger
	results := make(chan hedgeResult, 1+h.max)
	cancels := make([]context.CancelFunc, 0, 1+h.max)
	launch := func(k int, r *http.Request) {
		ctx, cancel := context.WithCancel(req.Context())
		cancels = append(cancels, cancel)
		r = r.WithContext(ctx)
		go func() {
			t0 := time.Now()
			resp, op, err := c.through(r)
			results <- hedgeResult{k: k, req: r, resp: resp, op: op, err: err, t0: t0, took: time.Since(t0)}
		}()
	}
	launch(0, req)
	timer := time.NewTimer(h.delay())
	defer timer.Stop()
	pending, sent := 1, 0
	var lastFail *hedgeResult
	for pending > 0 {
		select {
		case <-timer.C:
			if sent < h.max && c.mayHedge() {
				hreq, ok := hedgeRequest(req)
				if !ok {
					// Not sent: give back what mayHedge took.
					c.releaseHedges(1)
					c.budget.refund()
					continue
				}
				sent++
				pending++
				c.stats.hedges.Add(1)
				launch(sent, hreq)
				timer.Reset(h.delay())
			}
		case r := <-results:
			pending--
			h.record(&r)
			if r.final() {
				return c.settleHedge(n, last, &r, lastFail, sent, pending, cancels, results)
			}
			if r.op == observe.OpBreaker && r.k > 0 {
				// A hedge the breaker refused: no I/O, not the answer.
				c.observeCopy(r.req, n, last, nil, r.op, r.err, r.t0, hedgeTag{k: r.k})
				continue
			}
			if lastFail != nil {
				c.observeCopy(lastFail.req, n, last, lastFail.resp, lastFail.op, lastFail.err, lastFail.t0, hedgeTag{k: lastFail.k})
				if lastFail.resp != nil {
					drainClose(lastFail.resp)
				}
			}
			lastFail = &r
		}
	}
	// Every copy failed: the last failure is the attempt's.
	c.releaseHedges(sent)
	c.observeCopy(lastFail.req, n, last, lastFail.resp, lastFail.op, lastFail.err, lastFail.t0, hedgeTag{k: lastFail.k})
	return lastFail.resp, lastFail.op, lastFail.err
}

// settleHedge ends a hedged attempt on its winner w: the copies still in
// flight are cancelled and waited for, their responses closed (a
// cancelled copy costs its connection), an earlier failure's response
// drained, the hedges' permits given back, and the observers told of
// every copy.
func (c *Client) settleHedge(n int, last bool, w, failed *hedgeResult, sent, pending int, cancels []context.CancelFunc, results chan hedgeResult) (*http.Response, observe.Op, error) {
	for k, cancel := range cancels {
		if k != w.k {
			cancel()
		}
	}
	if failed != nil {
		if failed.resp != nil {
			drainClose(failed.resp)
		}
		c.observeCopy(failed.req, n, last, failed.resp, failed.op, failed.err, failed.t0, hedgeTag{k: failed.k})
	}
	for ; pending > 0; pending-- {
		r := <-results
		if r.resp != nil {
			drainClose(r.resp)
		}
		c.observeCopy(r.req, n, last, r.resp, r.op, r.err, r.t0, hedgeTag{k: r.k, lost: true})
	}
	c.releaseHedges(sent)
	won := hedgeTag{k: w.k, won: sent > 0}
	if w.k > 0 {
		c.stats.hedgesWon.Add(1)
	}
	c.observeCopy(w.req, n, last, w.resp, w.op, w.err, w.t0, won)
	return w.resp, w.op, w.err
}

// mayHedge takes what one hedge costs: a closed breaker (never a second
// copy while it is half-open), a bulkhead permit and a retry-budget
// token, none of them waited for. It reports whether the hedge may go.
func (c *Client) mayHedge() bool {
	if c.cb.State() != gobreaker.StateClosed || !c.bh.TryAcquire() {
		return false
	}
	if !c.budget.retry(time.Now()) {
		_ = c.bh.Release()
		return false
	}
	return true
}

// refund gives back the token of a retry that was taken but never sent
// (a hedge whose body could not be produced again).
func (b *retryBudget) refund() {
	b.mu.Lock()
	b.tokens = min(b.maxTokens, b.tokens+1)
	b.mu.Unlock()
}

// releaseHedges gives back the bulkhead permits of n hedges.
func (c *Client) releaseHedges(n int) {
	for range n {
		_ = c.bh.Release()
	}
}

// hedgeRequest copies req for a hedge: its own header (X-Time-Budget set
// to what is left now) and its body replayed through GetBody. ok is false
// when the body cannot be produced again.
func hedgeRequest(req *http.Request) (_ *http.Request, ok bool) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		b, err := req.GetBody()
		if err != nil {
			return nil, false
		}
		r.Body = b
	}
	if r.Header.Get(capbudget.Header) != "" {
		capbudget.SetHeader(req.Context(), r.Header)
	}
	return r, true
}

// hedgeTag says how an attempt took part in a hedged race: k is its copy
// (0 the first, 1.. the hedges); won marks the copy whose answer the
// caller got when there was more than one, lost one cancelled because
// another won.
type hedgeTag struct {
	k    int
	won  bool
	lost bool
}
