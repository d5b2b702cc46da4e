package fleet

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/observe"
)

// loop is the fleet's one talker to Redis: at most one round trip per
// tick (pace.go: FlushInterval, longer with more pods) or wake, each
// bounded by Timeout. In sync, a round trip carries every system's
// counts that changed, trips, probe results and lease requests, and
// reads the state back, and the quotas that have something to say; every
// readEvery it reads the state of every system, whatever else the round
// trips carried (a quota's grant reads no breaker's state). Degraded, it
// tries a read every tick until Redis answers.
func (f *Fleet) loop(ctx context.Context) {
	defer f.done.Done()
	cur := f.tick()
	tick := time.NewTicker(cur)
	defer tick.Stop()
	var lastRead time.Time // of the last round trip that read every state
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-f.wakeCh:
		}
		read := f.readSoon.Swap(false) || !f.synced.Load() || time.Since(lastRead) >= f.readEvery()
		readAll := f.step(ctx, read) && read
		if readAll {
			lastRead = time.Now()
		}
		if t := f.tick(); t != cur {
			tick.Reset(t)
			cur = t
		}
		f.showAll() // what the round trip read, or the open time passing
		if readAll {
			f.reads.Add(1) // once what it read is shown
		}
		f.remind()
	}
}

// roundTrip is one round trip to Redis: the ops it carries, each with
// what to do with its reply and what to put back if it is not delivered.
type roundTrip struct {
	f    *Fleet
	sent time.Time // before any of it was sent
	now  time.Time // when the replies came
	ops  []*op
}

// step runs one round trip, reading every system's state when read is
// set, and reports whether Redis answered. Its ops go in one call of the
// batch script per master (batch.go). Degraded, the round trip carries
// the check (checkScript) too: the fleet is in sync again only once
// Redis runs every kind of command it needs.
func (f *Fleet) step(ctx context.Context, read bool) bool {
	circuits, quotas := f.snapshot(), f.quotaSnapshot()
	if len(circuits) == 0 && len(quotas) == 0 {
		return false
	}
	synced := f.synced.Load()
	rt := &roundTrip{f: f, sent: time.Now()}
	if rt.sent.Sub(f.presentAt) >= f.cfg.ReadInterval {
		rt.presence()
	}
	for _, c := range circuits {
		rt.circuit(c, synced, read)
	}
	for _, q := range quotas {
		rt.quota(q)
	}
	if len(rt.ops) == 0 {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	pipe := f.rdb.Pipeline()
	if !synced {
		checkScript.EvalSha(rctx, pipe, []string{f.prefix + ":pod:" + f.holder},
			f.channel, message{kind: helloMessage, system: f.holder}.Format(), checkLife.Milliseconds())
	}
	batches := f.send(rctx, pipe, rt.ops)
	_, err := pipe.Exec(rctx)
	rt.now = time.Now()
	for _, b := range batches {
		b.settle() // the replies that came count, whatever failed beside them
	}
	for _, q := range quotas {
		q.settle(rt.now)
	}
	if err != nil {
		if f.failingSince.IsZero() {
			f.failingSince = rt.sent
		}
		return f.failed(rctx, err, circuits)
	}
	f.failingSince = time.Time{}
	f.ok()
	return true
}

// circuit adds c's ops: its changes (in sync), and the sync of its
// counts, when it has any or read is set.
func (rt *roundTrip) circuit(c *circuit, synced, read bool) {
	if synced {
		rt.changes(c)
	}
	reqs, fails := c.reqs.Swap(0), c.fails.Swap(0)
	if !synced {
		reqs, fails = 0, 0 // evidence gathered while degraded is stale
	}
	if reqs > 0 || read {
		rule := c.rule.Load()
		c.mu.Lock()
		totals := rt.sent.Sub(c.read) >= c.window/2
		c.mu.Unlock()
		rt.run(c, breakerOp{own: syncOwn, apply: (*circuit).applyWindow}, syncCall{breakerArgs: rt.breaker(c),
			requests: reqs, failures: fails, bucket: c.window / windowBuckets, buckets: windowBuckets,
			minRequests: rule.min, ratio: rule.ratio, mostForce: observe.MaxForce, readForce: read, readTotals: totals})
	}
}

// quota adds q's op when it has something to say (quota.due): what this
// pod wants, for its share (of the rate last set: quota.adopt); and a
// pause its upstream asked for that Redis does not have yet.
func (rt *roundTrip) quota(q *quota) {
	now := time.Now()
	q.adopt(now)
	if want, ack := q.ask(now); q.due(now, want, ack) {
		rt.ops = append(rt.ops, newOp(q.call(want, ack, now), func(r []int64, err error) {
			if !q.granted(r, err, rt.sent, rt.now) {
				q.missed(rt.sent)
			}
		}, nil))
	}
	p := q.pauseOut.Load()
	if p <= q.pauseSent {
		return
	}
	left := min(time.Duration(p-now.UnixNano()), q.bound)
	if left < time.Millisecond {
		q.pauseSent = p // over already
		return
	}
	call := pauseCall{base: q.base, channel: rt.f.channel, system: q.name, pause: left}
	rt.ops = append(rt.ops, newOp(call, func(r []int64, err error) {
		pr, ok := readPauseReply(r)
		switch {
		case errors.Is(err, errShape) || (err == nil && (!ok || pr.malformed < 0)):
			q.pauseSent = p
			rt.f.malformed.Add(1)
		case err != nil: // sent again on the next round trip
		default:
			q.pauseSent = p
			rt.f.malformed.Add(uint64(pr.malformed))
		}
	}, nil))
}

// checkLife is how long the key the check writes lives.
const checkLife = 10 * time.Second

// forceNotRead is the override of a sync that did not read it, and
// totalsNotRead the window's counts of one that did not read the window.
const (
	forceNotRead  = -1
	totalsNotRead = -1
)

// windowBuckets is the number of buckets of a fleet window
// (lua/sync.lua).
const windowBuckets = 10

// breaker is the arguments every op of c begins with.
func (rt *roundTrip) breaker(c *circuit) breakerArgs {
	return breakerArgs{base: c.base, channel: rt.f.channel, system: c.name, open: c.openTimeout}
}

// breakerOp is how the reply of one op of a breaker is read: how many
// values of its own it holds after the state's (own), what applies it,
// and what puts back what was taken for the op when it was not delivered
// (nil: nothing).
type breakerOp struct {
	own   int
	apply func(*circuit, state, []int64, *roundTrip, time.Time)
	undo  func()
}

// run adds the op call of c, whose reply o reads.
func (rt *roundTrip) run(c *circuit, o breakerOp, call opCall) {
	rt.ops = append(rt.ops, newOp(call, func(r []int64, err error) {
		if errors.Is(err, errShape) {
			c.f.malformed.Add(1)
		}
		if err != nil {
			return
		}
		if st, own, ok := c.readReply(r, o.own); ok {
			o.apply(c, st, own, rt, rt.now)
		}
	}, o.undo))
}

// changes adds what c has to change in Redis: a state Redis lost, probe
// results, a trip of its own breaker, a lease a call wanted.
func (rt *roundTrip) changes(c *circuit) {
	v := c.view.Load()
	if c.restore.Swap(false) {
		left := time.Duration(0)
		if v.open {
			left = max(0, time.Until(v.until))
		}
		rt.run(c, breakerOp{apply: (*circuit).applyState, undo: func() { c.restore.Store(true) }},
			restoreCall{breakerArgs: rt.breaker(c), version: v.ver, open: v.open, left: left})
	}
	c.mu.Lock()
	results := c.results
	c.results = nil
	propose := !v.open && c.proposed != v.ver+1 && c.localOpen()
	if propose {
		c.proposed = v.ver + 1
	}
	c.mu.Unlock()
	for i, r := range results {
		var undo func()
		if i == 0 {
			undo = func() { c.requeue(results) }
		}
		rt.run(c, breakerOp{apply: (*circuit).applyState, undo: undo},
			probeCall{breakerArgs: rt.breaker(c), version: r.ver, ok: r.ok, probes: c.probes})
	}
	if propose {
		rt.run(c, breakerOp{apply: (*circuit).applyState, undo: func() { c.unpropose(v.ver) }},
			tripCall{breakerArgs: rt.breaker(c), version: v.ver})
	}
	// A lease is asked for when a call wanted one, at most once per
	// leaseEvery: refused calls wake the loop, and must not turn into
	// Redis commands at the call rate.
	if now := time.Now(); v.open && !now.Before(v.until) && now.Sub(c.leased) >= leaseEvery(rt.f.cfg) && c.want.Swap(false) {
		c.leased = now
		rt.run(c, breakerOp{own: leaseOwn, apply: (*circuit).applyLease, undo: func() { c.want.Store(true) }},
			leaseCall{breakerArgs: rt.breaker(c), version: v.ver, probes: c.probes, life: c.lease, holder: rt.f.holder})
	}
}

// failed handles a round trip that failed: a sync failure with its cause
// (stall), whether Redis could not be reached or refused a command (a
// Redis user without the rights the fleet needs, a script that failed),
// unless Redis had lost the scripts (it restarted empty): then they are
// loaded again, and the loop runs again at once.
func (f *Fleet) failed(ctx context.Context, err error, circuits []*circuit) bool {
	if errors.Is(err, context.Canceled) {
		return false // Close
	}
	if !redis.HasErrorPrefix(err, "NOSCRIPT") {
		f.stall(err)
		return false
	}
	for _, s := range []*redis.Script{f.batch, checkScript, forceScript} {
		if lerr := s.Load(ctx, f.rdb).Err(); lerr != nil {
			f.fail(lerr)
			return false
		}
	}
	for _, c := range circuits {
		c.restore.Store(true) // a restart empties the state too
	}
	f.wake()
	return true
}

// stall takes a round trip's failure as a sync failure, but not at once
// when Redis could not be reached in time while in sync: a machine under
// load stalls a round trip now and then, and a pod that went local for
// it would send every call of an open fleet breaker to the upstream (its
// own breaker, closed, saw none of them). The fleet keeps its state, and
// reads again on the next tick, until round trips have failed for
// 3 x Timeout. A refusal by Redis (an error reply) is a failure at once.
func (f *Fleet) stall(err error) {
	var refused redis.Error
	if f.synced.Load() && !errors.As(err, &refused) && time.Since(f.failingSince) < 3*f.cfg.Timeout {
		f.note(err)
		f.readSoon.Store(true)
		return
	}
	f.fail(err)
}

// applyState applies the state a script replied.
func (c *circuit) applyState(st state, _ []int64, _ *roundTrip, now time.Time) {
	if c.apply(st, now) {
		c.restore.Store(true)
	}
}

// applyWindow applies the reply of the sync script: the state, the fleet
// window's requests and failures, and the operator's override.
func (c *circuit) applyWindow(st state, own []int64, rt *roundTrip, now time.Time) {
	c.applyState(st, nil, rt, now)
	w := readSyncReply(own)
	if w.force != forceNotRead {
		c.readForced(w.force, w.forceLeftMs, rt.sent, now)
	}
	if w.requests == totalsNotRead && w.failures == totalsNotRead {
		return
	}
	if reqs, fails, ok := c.readWindow(w); ok {
		c.mu.Lock()
		c.totals = [2]uint64{reqs, fails}
		c.read = now
		c.mu.Unlock()
	}
}

// applyLease applies the reply of the lease script: a lease is one probe
// this pod may start, until grantLife after the request was sent (not
// after the reply came: see newCircuit).
func (c *circuit) applyLease(st state, own []int64, rt *roundTrip, now time.Time) {
	c.applyState(st, nil, rt, now)
	switch i := readLeaseReply(own).lease; {
	case i < 0 || i > int64(c.probes):
		c.f.malformed.Add(1)
	case i > 0:
		g := c.grant.Load()
		if g == nil || g.ver != st.ver || !now.Before(g.until) {
			g = &grant{ver: st.ver, until: rt.sent.Add(c.grantLife)}
			g.left.Store(1)
			c.grant.Store(g)
		} else {
			g.left.Add(1)
		}
	}
}

// requeue puts back the probe results a failed round trip did not
// deliver, before those that came since.
func (c *circuit) requeue(rs []probeResult) {
	c.mu.Lock()
	c.results = append(rs, c.results...)
	c.mu.Unlock()
}

// unpropose forgets that this pod asked to open the closed version ver: a
// failed round trip did not deliver it.
func (c *circuit) unpropose(ver int64) {
	c.mu.Lock()
	if c.proposed == ver+1 {
		c.proposed = 0
	}
	c.mu.Unlock()
}

// leaseEvery is the least time between two lease requests of a system.
func leaseEvery(cfg Config) time.Duration { return cfg.FlushInterval / 4 }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// listen applies the changes published on the fleet's channel as they
// come: every pod sees a change within one message's delivery. A broken
// subscription marks the fleet degraded, and the fleet is in sync again
// only once it is back; then the loop reads every state (messages may
// have been missed).
func (f *Fleet) listen(ctx context.Context) {
	defer f.done.Done()
	for ctx.Err() == nil {
		if err := f.subscribe(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			f.subscribed.Store(false)
			f.fail(err)
			f.showAll()
			select {
			case <-ctx.Done():
				return
			case <-time.After(f.cfg.FlushInterval):
			}
			continue
		}
		for {
			msg, err := f.ps.Receive(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				f.subscribed.Store(false)
				f.fail(err)
				f.showAll() // degraded: every breaker local
				break
			}
			switch m := msg.(type) {
			case *redis.Message:
				f.onMessage(m.Payload)
			case *redis.Subscription:
				f.subscribed.Store(m.Kind == "subscribe")
				f.wake()
			}
		}
	}
}

// subscribe (re)subscribes to the fleet's channel.
func (f *Fleet) subscribe(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	if err := f.ps.Subscribe(sctx, f.channel); err != nil {
		return err
	}
	return nil
}

func sortCircuits(cs []*circuit) {
	slices.SortFunc(cs, func(a, b *circuit) int { return strings.Compare(a.name, b.name) })
}
