package fleet

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// loop is the fleet's one talker to Redis: at most one pipelined round
// trip per tick (FlushInterval) or wake, each bounded by Timeout. In sync,
// a round trip carries every system's counts that changed, trips, probe
// results and lease requests, and reads the state back; when nothing
// changed for ReadInterval it reads the state alone. Degraded, it tries a
// read every tick until Redis answers.
func (f *Fleet) loop(ctx context.Context) {
	defer f.done.Done()
	tick := time.NewTicker(f.cfg.FlushInterval)
	defer tick.Stop()
	var last time.Time // of the last round trip that succeeded
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-f.wakeCh:
		}
		read := !f.synced.Load() || time.Since(last) >= f.cfg.ReadInterval
		if f.step(ctx, read) {
			last = time.Now()
		}
		f.showAll() // what the round trip read, or the open time passing
	}
}

// op is one script call of a round trip and what to do with its reply.
type op struct {
	c     *circuit
	cmd   *redis.Cmd
	apply func(c *circuit, r []int64, now time.Time)
}

// step runs one round trip, reading every system's state when read is
// set, and reports whether Redis answered.
func (f *Fleet) step(ctx context.Context, read bool) bool {
	circuits := f.snapshot()
	if len(circuits) == 0 {
		return false
	}
	synced := f.synced.Load()
	rctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	pipe := f.rdb.Pipeline()
	var ops []op
	run := func(c *circuit, s *redis.Script, apply func(*circuit, []int64, time.Time), args ...any) {
		ops = append(ops, op{c: c, cmd: s.EvalSha(rctx, pipe, []string{c.base + ":state"}, args...), apply: apply})
	}
	for _, c := range circuits {
		v := c.view.Load()
		if synced {
			if c.restore.Swap(false) {
				left := int64(0)
				if v.open {
					left = time.Until(v.until).Milliseconds()
				}
				run(c, restoreScript, applyState, v.ver, b2i(v.open), left, f.channel, c.name)
			}
			c.mu.Lock()
			results := c.results
			c.results = nil
			propose := !v.open && c.proposed != v.ver+1 && c.local.State() == gobreaker.StateOpen
			if propose {
				c.proposed = v.ver + 1
			}
			c.mu.Unlock()
			for _, r := range results {
				run(c, probeScript, applyState, r.ver, b2i(r.ok), c.probes, c.openTimeout.Milliseconds(), f.channel, c.name)
			}
			if propose {
				run(c, tripScript, applyState, v.ver, c.openTimeout.Milliseconds(), f.channel, c.name)
			}
			// A lease is asked for when a call wanted one, at most once
			// per leaseEvery: refused calls wake the loop, and must not
			// turn into Redis commands at the call rate.
			if now := time.Now(); v.open && !now.Before(v.until) && now.Sub(c.leased) >= leaseEvery(f.cfg) && c.want.Swap(false) {
				c.leased = now
				run(c, leaseScript, applyLease, c.base, v.ver, c.probes, c.lease.Milliseconds(), f.holder)
			}
		}
		reqs, fails := c.reqs.Swap(0), c.fails.Swap(0)
		if !synced {
			reqs, fails = 0, 0 // evidence gathered while degraded is stale
		}
		if reqs > 0 || read {
			run(c, syncScript, applyWindow, c.base, reqs, fails, (c.window / 10).Milliseconds(), 10,
				c.minRequests, strconv.FormatFloat(c.ratio, 'g', -1, 64), c.openTimeout.Milliseconds(), f.channel, c.name)
		}
	}
	if len(ops) == 0 {
		return false
	}
	_, err := pipe.Exec(rctx)
	if err != nil && !isScriptErr(err) {
		if !errors.Is(err, context.Canceled) {
			f.fail(err)
		}
		return false
	}
	if err != nil && strings.Contains(err.Error(), "NOSCRIPT") {
		// Redis restarted empty: load the scripts, and run again now.
		for _, s := range scripts {
			if lerr := s.Load(rctx, f.rdb).Err(); lerr != nil {
				f.fail(lerr)
				return false
			}
		}
		f.wake()
		for _, c := range circuits {
			c.restore.Store(true) // a restart empties the state too
		}
		return true
	}
	now := time.Now()
	for _, o := range ops {
		r, err := o.cmd.Int64Slice()
		if err != nil || len(r) < 3 {
			continue
		}
		o.apply(o.c, r, now)
	}
	f.ok()
	return true
}

// isScriptErr reports whether err is Redis answering a script call with
// an error (NOSCRIPT, or a script that failed), not a failure to reach
// it. go-redis offers no type for it; redis.Error is the server's reply.
func isScriptErr(err error) bool {
	var re redis.Error
	var ne net.Error
	return errors.As(err, &re) && !errors.As(err, &ne)
}

// applyState applies the reply {v, s, ms left} of any script.
func applyState(c *circuit, r []int64, now time.Time) {
	if c.apply(r[0], r[1] == 1, time.Duration(r[2])*time.Millisecond, now) {
		c.restore.Store(true)
	}
}

// applyWindow applies the reply {v, s, ms left, requests, failures} of the
// sync script.
func applyWindow(c *circuit, r []int64, now time.Time) {
	applyState(c, r, now)
	if len(r) == 5 {
		c.mu.Lock()
		c.totals = [2]uint64{uint64(r[3]), uint64(r[4])}
		c.read = now
		c.mu.Unlock()
	}
}

// applyLease applies the reply {v, s, ms left, lease} of the lease script:
// a lease is one probe this pod may start.
func applyLease(c *circuit, r []int64, now time.Time) {
	applyState(c, r, now)
	if len(r) == 4 && r[3] > 0 {
		g := c.grant.Load()
		if g == nil || g.ver != r[0] || !now.Before(g.until) {
			g = &grant{ver: r[0], until: now.Add(c.grantLife)}
			g.left.Store(1)
			c.grant.Store(g)
		} else {
			g.left.Add(1)
		}
	}
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
// subscription marks the fleet degraded; when it is back, the loop reads
// every state (messages may have been missed).
func (f *Fleet) listen(ctx context.Context) {
	defer f.done.Done()
	for ctx.Err() == nil {
		if err := f.subscribe(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
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
				f.fail(err)
				f.showAll() // degraded: every breaker local
				break
			}
			switch m := msg.(type) {
			case *redis.Message:
				f.onMessage(m.Payload)
			case *redis.Subscription:
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

// onMessage applies "<system> <v> <s> <ms left>".
func (f *Fleet) onMessage(payload string) {
	w := strings.Fields(payload)
	if len(w) != 4 {
		return
	}
	f.mu.Lock()
	c := f.circuits[w[0]]
	f.mu.Unlock()
	if c == nil {
		return
	}
	ver, err1 := strconv.ParseInt(w[1], 10, 64)
	left, err2 := strconv.ParseInt(w[3], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	c.apply(ver, w[2] == "1", time.Duration(left)*time.Millisecond, time.Now())
	c.show()
}

func sortCircuits(cs []*circuit) {
	slices.SortFunc(cs, func(a, b *circuit) int { return strings.Compare(a.name, b.name) })
}
