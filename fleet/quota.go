package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// quota is this pod's share of a system's quota at RATE_SCOPE=fleet, the
// registry's Quota for that system. Requests spend from a local token
// bucket (share) and never talk to Redis; the fleet's loop
// sets the bucket's rate and burst from the share Redis grants each tick
// (lua/quota.lua), or from limit / pods last seen when Redis does not
// answer. A quota is safe for concurrent use.
//
// Its rate changes while it runs ([quota.SetRate]): the loop takes the
// new one up on its next round trip, and the fleet shares the new limit
// from the reply on (lua/quota.lua grants against the least limit of the
// live pods).
type quota struct {
	f     *Fleet
	name  string
	base  string
	rate  atomic.Pointer[config.Rate] // the rate last set, in force from the loop's next round trip
	bound time.Duration               // the longest pause this pod takes: min(CALL_TIMEOUT, maxPause)
	life  time.Duration               // how long the grant last asked for holds (the loop's alone, join's before it)
	share *share

	synced   atomic.Bool  // the rate is a grant from Redis
	pauseOut atomic.Int64 // the latest pause this pod's upstream asked for, Unix ns
	// pauseReport tells the registry's observers of a pause learned from
	// the fleet (FleetSystem.Pauses); nil: nobody listens.
	pauseReport func(until time.Time)

	// The loop's alone (join's, before the loop knows the quota; release's,
	// once it has stopped):
	inForce   config.Rate // the rate limit and burst follow
	limit     int64       // inForce's RATE_LIMIT, micro-requests per second
	burst     int         // inForce's burst (RATE_BURST, or derived)
	sentLimit int64       // the limit the last op said
	grant     int64       // micro-requests per second, last granted
	leaseEnd  time.Time   // the grant holds until then: its round trip's send + life
	missedAt  time.Time   // the send of the first round trip that failed since the last grant
	pods      int         // pods last seen, at least 1
	fellBack  bool        // the rate is a fallback, not a grant
	resyncEnd time.Time   // back from a fallback: the share is at most limit / pods until then
	wants     demand
	pauseSent int64 // the last pause written to Redis, Unix ns
	sentWant  int64 // the want and the ack the last op said
	sentAck   int64
}

// maxPause is the longest pause this pod takes, whatever the upstream,
// another pod or Redis says: the core's own bound on an upstream's pause
// (5 minutes), which a value read from outside is held to like an
// environment variable.
const maxPause = 5 * time.Minute

// micro is the unit of the rates the fleet keeps in Redis: requests per
// second x 10^6, integers.
const micro = 1e6

// maxPods is the most pods a reply may count.
const maxPods = 1 << 20

// addQuota makes the quota of system (rate r, pauses at most bound) a
// share of the fleet's; pauses (nil: nobody listens) is told of the pauses
// learned from other pods. It asks Redis for a first share before it
// returns, bounded by Config.Timeout: a call made right after the
// registry is built spends a share, not nothing (or, Redis failing, the
// fallback).
func (f *Fleet) addQuota(system string, r config.Rate, bound time.Duration, pauses func(until time.Time)) (*quota, error) {
	q := &quota{
		f: f, name: system, base: keyBase(f.cfg.Namespace, system), bound: bound, life: grantLife(f.cfg, f.tick()),
		share: newShare(r.String(), "fleet"), pods: 1, pauseReport: pauses,
	}
	q.rate.Store(&r)
	q.adopt(time.Now())
	q.wants.start(time.Now(), f.cfg.FlushInterval)
	if err := f.joinable(system); err != nil {
		return nil, err
	}
	q.join()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.joinableLocked(system); err != nil {
		return nil, err
	}
	f.quotas[system] = q
	f.wake()
	return q, nil
}

func (f *Fleet) joinable(system string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.joinableLocked(system)
}

func (f *Fleet) joinableLocked(system string) error {
	if f.closed {
		return errClosed
	}
	if _, dup := f.quotas[system]; dup {
		return fmt.Errorf("fleet: system %q is already in this fleet's quotas (one Fleet per registry)", system)
	}
	return nil
}

// SetRate makes r, a limited rate, the quota's (registry.SharedQuota): a
// change of RATE_LIMIT or RATE_BURST in the settings. The loop takes it up
// on its next round trip, which it runs at once, and asks for a share of
// the new limit on it; the fleet re-shares the limit from that reply on,
// granting every pod against the least limit of the live pods (pods that
// disagree for a moment stay within the stricter). A lower limit cuts
// this pod's share at once to an even split of it (limit / pods last
// seen), so that it is never granted, nor sends at, more than the new
// limit allows from its own change on; the other pods may still hold
// grants sized for the old limit until those end, at most a grant life
// (max(4 x tick, ReadInterval) + Timeout, 1.1s with Config's defaults)
// after the op that granted them.
func (q *quota) SetRate(r config.Rate) {
	if !r.Limited() {
		return // a quota at scope fleet has a limit (config's rule)
	}
	q.rate.Store(&r)
	q.f.wake()
}

// adopt takes up the rate last set, at now, when it is not the one in
// force (the loop's, before the op of its round trip): the limit and
// burst follow it, a lower limit cuts the share (see SetRate), the share
// takes the new burst at once, and the next op says the new limit (due).
func (q *quota) adopt(now time.Time) {
	r := *q.rate.Load()
	if r == q.inForce {
		return
	}
	limit, first := int64(r.PerSecond()*micro), q.limit == 0
	if limit < q.limit {
		q.grant = min(q.grant, limit/int64(q.pods))
	}
	q.inForce, q.limit, q.burst = r, limit, r.Burst
	if !first {
		q.settle(now)
	}
}

// join asks Redis for the first share, unless Redis is known to fail.
func (q *quota) join() {
	now := time.Now()
	if q.f.degradedAtStart() {
		q.missed(now)
		q.settle(now)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.f.cfg.Timeout)
	defer cancel()
	want, ack := q.ask(now)
	q.f.runOps(ctx, newOp(q.call(want, ack, now), func(r []int64, err error) {
		if !q.granted(r, err, now, time.Now()) {
			q.missed(now)
		}
	}, nil))
	q.settle(time.Now())
}

// degradedAtStart reports whether Redis failed before the fleet ever
// synced (New's ping): then a join would only wait.
func (f *Fleet) degradedAtStart() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.synced.Load() && f.lastErr != ""
}

// ask is what this pod says at now: what it wants (1.25 x the requests
// that asked for a token over the last second, plus those waiting now
// per tick, at most the limit) and the rate it may still send at (its
// rate now, in force until a reply is applied).
func (q *quota) ask(now time.Time) (want, ack int64) {
	asked, waiting := q.share.Demand()
	q.wants.add(now, asked)
	perTick := float64(waiting) / q.f.tick().Seconds()
	want = min(q.limit, int64((1.25*q.wants.perSec()+perTick)*micro))
	perSec, _ := q.share.Rate()
	return want, min(q.limit, int64(perSec*micro))
}

// due reports whether this pod has something to say at now, wanting want
// and sending at ack:
//   - on every tick while it has no grant from Redis, resyncs, or holds
//     more than an even split of the limit (only a count of every entry
//     grants that, and a count every tick sees within a tick what the
//     others took meanwhile, even when forged totals let them);
//   - when its limit changed since it last said (SetRate);
//   - when its rate fell by more than an eighth since it last said:
//     another pod may wait for it to apply a cut. A rate that rose holds
//     nothing more in Redis (the entry holds the larger of the grant and
//     the rate said); a smaller cut is said with the next renewal;
//   - when its grant has half its life left or less (it is renewed
//     before it ends);
//   - when its want moved by more than an eighth of the larger of its
//     last want and its grant, or to or from nothing: a want well under
//     its grant changes no share that matters (for a pod the fair level
//     holds under its want, the larger is its want).
//
// An idle pod asks about twice a grant life, not every tick.
func (q *quota) due(now time.Time, want, ack int64) bool {
	switch {
	case q.leaseEnd.IsZero() || !q.missedAt.IsZero() || q.fellBack || now.Before(q.resyncEnd):
		return true
	case q.sentLimit != q.limit:
		return true
	case q.grant > q.limit/int64(q.pods):
		return true
	case q.sentAck-ack > q.sentAck/8 || q.leaseEnd.Sub(now) <= q.life/2:
		return true
	}
	moved, scale := want-q.sentWant, max(q.sentWant, q.grant)/8
	return (want == 0) != (q.sentWant == 0) || moved > scale || -moved > scale
}

// call is the quota op (lua/quota.lua) at now for want and ack: with
// them, the most it takes (limit / pods while it resyncs), its grant's
// life at the fleet's tick now, the tick (how old the fleet's totals may
// be), the longest grant life of any pod (what an entry may hold at
// most) and the most fields of the hash.
func (q *quota) call(want, ack int64, now time.Time) quotaCall {
	tick := q.f.tick()
	q.life = grantLife(q.f.cfg, tick)
	q.sentWant, q.sentAck, q.sentLimit = want, ack, q.limit
	most := q.limit
	if now.Before(q.resyncEnd) {
		most = q.limit / int64(q.pods)
	}
	return quotaCall{base: q.base, holder: q.f.holder, limit: q.limit, demand: want, ack: ack, most: most,
		life: q.life, longestPause: q.bound, lostCap: q.limit / int64(q.pods),
		period: tick, longestLife: maxGrantLife(q.f.cfg), mostFields: q.mostFields()}
}

// mostFields is the most fields the quota op takes the quota's hash to hold
// before it deletes it as garbage: four per pod this pod knows of (the
// pods that left within a grant life are still there), and spare; before
// this pod has counted the pods, as many as a reply may count.
func (q *quota) mostFields() int64 {
	pods := max(int64(q.pods), q.f.podsSeen.Load())
	if pods <= 1 && q.leaseEnd.IsZero() {
		return maxPods
	}
	return 4*pods + 1024
}

// granted applies a reply of the quota op (quotaReply) to the round trip
// sent at sent, or its absence
// (err). It reports false when there is no reply, or one that no op
// could have sent (counted).
func (q *quota) granted(r []int64, err error, sent, now time.Time) bool {
	if errors.Is(err, errShape) {
		q.f.malformed.Add(1)
	}
	if err != nil {
		return false
	}
	qr, ok := readQuotaReply(r)
	if !ok || qr.malformed < 0 || qr.capped < 0 {
		q.f.malformed.Add(1)
		return false
	}
	q.f.malformed.Add(uint64(qr.malformed))
	q.f.capped.Add(uint64(qr.capped))
	g, n, pause, lost := qr.grant, qr.pods, qr.pauseMs, qr.lost
	if g < 0 || g > q.limit || n < 1 || n > maxPods || pause < 0 || lost < 0 || lost > 1 {
		q.f.malformed.Add(1)
		return false
	}
	if q.fellBack || lost == 1 {
		// Back from a fallback, or Redis lost the shares: the other pods
		// come back over the next tick, and the grants of those that do
		// not expire within life.
		q.resyncEnd = now.Add(q.life + q.f.tick())
		q.fellBack = false
	}
	if now.Before(q.resyncEnd) {
		n = max(n, int64(q.pods)) // Redis may have lost the others
		g = min(g, q.limit/n)
	}
	q.grant, q.pods, q.leaseEnd, q.missedAt = g, int(n), sent.Add(q.life), time.Time{}
	if pause > 0 {
		q.readPause(pause, now)
	}
	return true
}

// missed notes a round trip sent at sent that brought no grant.
func (q *quota) missed(sent time.Time) {
	if q.missedAt.IsZero() {
		q.missedAt = sent
	}
}

// settle sets the share's rate at now: the grant while it holds; once it
// has expired, limit / pods last seen, but no more than the grant until
// every other pod's grant has expired too (Redis failed at most Timeout
// after this pod's first failed round trip was sent, so theirs end by
// then + their grant life: othersLife); a pod that never had a grant
// falls back at once.
func (q *quota) settle(now time.Time) {
	perSec := q.grant
	synced := now.Before(q.leaseEnd)
	if !synced {
		perSec = q.limit / int64(q.pods)
		if !q.leaseEnd.IsZero() && now.Before(q.missedAt.Add(q.f.cfg.Timeout+othersLife(q.f.cfg, max(q.pods, int(q.f.podsSeen.Load()))))) {
			perSec = min(perSec, q.grant)
		}
		q.fellBack = true
	}
	q.share.SetRate(float64(perSec)/micro, q.burstOf(perSec))
	end := time.Time{} // limit / pods holds until Redis grants again
	if synced {
		end = q.leaseEnd // a grant holds until its end, however late the loop runs
	}
	q.share.SetEnd(end)
	q.synced.Store(synced)
}

// burstOf is the burst of a share of perSec: the fleet's burst in the
// share's proportion, at least 1 (a bucket of 0 sends nothing).
func (q *quota) burstOf(perSec int64) int {
	if perSec <= 0 {
		return 0
	}
	return max(1, int(math.Floor(float64(q.burst)*float64(perSec)/float64(q.limit))))
}

// closeQuota leaves the share at limit / pods last seen (of the rate
// last set): the fleet is closed, nothing will grant it again.
func (q *quota) closeQuota() {
	q.adopt(time.Now())
	perSec := q.limit / int64(q.pods)
	q.share.SetRate(float64(perSec)/micro, q.burstOf(perSec))
	q.share.SetEnd(time.Time{})
	q.synced.Store(false)
}

// Wait takes a token of this pod's share (registry.SharedQuota).
func (q *quota) Wait(ctx context.Context, maxWait time.Duration) error {
	return q.share.Wait(ctx, maxWait)
}

// Pause stops every request of this pod until until, at most the pod's
// longest pause from now, and has the loop pause every other pod.
func (q *quota) Pause(until time.Time) {
	if most := time.Now().Add(q.bound); until.After(most) {
		until = most
	}
	q.share.Pause(until)
	if until.UnixNano() > q.pauseOut.Load() {
		extendPause(&q.pauseOut, until)
		q.f.wake()
	}
}

// Status is the share's state (registry.SharedQuota): Synced while the rate is
// a grant from Redis and the fleet is in sync ([Fleet.Sync]): a grant
// alone is not, when the pod cannot use the fleet's channel (the pauses
// of the other pods do not reach it). Not synced, LastError is Sync's.
// The rate stays the grant while one holds: Redis gave it, within the
// fleet's bound.
func (q *quota) Status() observe.RateStatus {
	st := q.share.Status()
	st.Limit = q.rate.Load().String()
	st.Synced = q.synced.Load() && q.f.synced.Load() && !q.share.ended()
	if !st.Synced {
		st.LastError = q.f.Sync().LastError
	}
	return st
}

// readPause applies a pause of ms read from Redis or the channel: at most
// the pod's longest pause (capped), never negative (malformed). The
// registry's observers are told of it (once per pause: the registry
// drops a pause it told already, such as this pod's own).
func (q *quota) readPause(ms int64, now time.Time) {
	switch limit := q.bound.Milliseconds(); {
	case ms < 0:
		q.f.malformed.Add(1)
		return
	case ms > limit:
		q.f.capped.Add(1)
		ms = limit
	}
	until := now.Add(time.Duration(ms) * time.Millisecond)
	q.share.Pause(until)
	if q.pauseReport != nil && ms > 0 {
		q.pauseReport(until)
	}
}

// errNoRate refuses a quota with no rate limit.
var errNoRate = errors.New("no RATE_LIMIT")

// demand is the rate of the requests a pod asked for over the last
// second: the counts of the last asks, each of the requests since the ask
// before. At a tick longer than a second, the last count alone covers
// more than a second, and the rate is its own (a second alone may hold
// none of the counts).
type demand struct {
	least time.Duration // the shortest span a rate is taken over
	n     int           // the counts held, newest first
	from  [demandCounts]time.Time
	asked [demandCounts]uint64
	last  time.Time // the end of the newest count
}

// demandCounts is the most counts a demand holds: a second of them at
// the shortest tick, with room for the asks of a loop woken between
// ticks.
const demandCounts = 16

func (d *demand) start(now time.Time, least time.Duration) { d.last, d.least = now, least }

// add counts asked, the requests since the last add, at now.
func (d *demand) add(now time.Time, asked uint64) {
	copy(d.from[1:], d.from[:demandCounts-1])
	copy(d.asked[1:], d.asked[:demandCounts-1])
	d.from[0], d.asked[0], d.last = d.last, asked, now
	d.n = min(d.n+1, demandCounts)
}

// perSec is the rate asked over the newest counts that cover a second
// (or all it holds), as of the last add.
func (d *demand) perSec() float64 {
	var sum uint64
	span := d.least
	for k := range d.n {
		sum += d.asked[k]
		span = max(d.least, d.last.Sub(d.from[k]))
		if span >= time.Second {
			break
		}
	}
	return float64(sum) / span.Seconds()
}
