package fleet

import (
	"time"
)

// The fleet's pace follows its size. Every pod says it is alive once a
// ReadInterval (lua/presence.lua), in one sorted set of the namespace,
// outbound:fleet:{<namespace>}:pods, and learns how many pods are; with
// more pods, each ticks less often:
//
//	tick = FlushInterval x clamp(pods / podsPerTick, 1, maxTickFactor)
//
// so that the fleet makes about podsPerTick pods' round trips per
// FlushInterval (250 a second with the defaults) up to 500 pods, and a
// round trip every 2s per pod beyond. What follows the tick follows it:
// a quota's grant lives max(4 x tick, ReadInterval) + Timeout, and every
// state is read back every max(ReadInterval, 2 x tick). What does not
// wait for a tick does not change: a pod's own breaker tripping, a
// probe's result, a lease wanted and a pause wake the loop at once, and
// changes still reach every pod by message.

// podsPerTick is how many pods tick every FlushInterval.
const podsPerTick = 50

// maxTickFactor bounds the tick: FlushInterval x 10 (2s by default).
const maxTickFactor = 10

// tickFor is the tick of a fleet of pods pods.
func tickFor(cfg Config, pods int) time.Duration {
	k := min(max(float64(pods)/podsPerTick, 1), maxTickFactor)
	return time.Duration(float64(cfg.FlushInterval) * k)
}

// tick is the loop's tick now.
func (f *Fleet) tick() time.Duration { return time.Duration(f.tickNs.Load()) }

// readEvery is how often every state is read back now.
func (f *Fleet) readEvery() time.Duration { return max(f.cfg.ReadInterval, 2*f.tick()) }

// grantLife is how long a grant holds without a new one, at a tick of
// tick: a pod that missed a few ticks keeps its share, one that died
// gives it back.
func grantLife(cfg Config, tick time.Duration) time.Duration {
	return max(4*tick, cfg.ReadInterval) + cfg.Timeout
}

// maxGrantLife is the longest grant life of any pod of the fleet (at the
// longest tick): the most a pod may hold a share without a new grant,
// whatever number of pods it has seen.
func maxGrantLife(cfg Config) time.Duration {
	return grantLife(cfg, maxTickFactor*cfg.FlushInterval)
}

// othersLife is the longest grant life this pod expects of the others,
// which knows of pods pods: the pods of a fleet count each other within
// a ReadInterval, so it allows them twice as many.
func othersLife(cfg Config, pods int) time.Duration {
	return grantLife(cfg, tickFor(cfg, 2*pods))
}

// presenceLife is how long a pod counts as alive after it said so.
func presenceLife(cfg Config) time.Duration { return 3 * cfg.ReadInterval }

// presence adds the op that says this pod is alive, and applies the
// count it replies: the tick follows it.
func (rt *roundTrip) presence() {
	f := rt.f
	call := presenceCall{pods: f.podsKey, holder: f.holder, life: presenceLife(f.cfg)}
	rt.ops = append(rt.ops, newOp(call, func(r []int64, err error) {
		pr, ok := readPresenceReply(r)
		switch {
		case err != nil:
			if err == errShape {
				f.malformed.Add(1)
			}
			return
		case !ok || pr.pods < 1 || pr.pods > maxPods || pr.malformed < 0:
			f.malformed.Add(1)
			return
		}
		f.malformed.Add(uint64(pr.malformed))
		f.presentAt = rt.sent
		f.podsSeen.Store(pr.pods)
		f.tickNs.Store(int64(tickFor(f.cfg, int(pr.pods))))
	}, nil))
}
