package fleet

import (
	"strconv"
	"time"
)

// Each op of the batch script (lua/<name>.lua) is sent from one type
// here, whose fields are its arguments by name, and whose call returns
// its name, KEYS and ARGV in the order its file's header names them.

// opCall is an op's name, KEYS and ARGV.
type opCall interface {
	call() (name string, keys []string, args []any)
}

// newOp is the op of c, with done for its reply and undo (nil: nothing)
// for its absence.
func newOp(c opCall, done func(r []int64, err error), undo func()) *op {
	name, keys, args := c.call()
	return &op{name: name, keys: keys, args: args, done: done, undo: undo}
}

// ms is d in whole milliseconds, as the scripts take durations.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// breakerArgs are the arguments every op of a breaker begins with
// (lua/breaker.lua).
type breakerArgs struct {
	base, channel, system string
	open                  time.Duration // BREAKER_OPEN_TIMEOUT
}

func (b breakerArgs) args(more ...any) []any {
	return append([]any{b.base, b.channel, b.system, ms(b.open)}, more...)
}

func (b breakerArgs) state() string { return b.base + ":state" }

// syncCall is lua/sync.lua.
type syncCall struct {
	breakerArgs
	requests, failures uint64
	bucket             time.Duration
	buckets            int
	minRequests        int
	ratio              float64
	mostForce          time.Duration
	readForce          bool
	readTotals         bool // read the window back, whatever the counts
}

func (s syncCall) call() (string, []string, []any) {
	return "sync", []string{s.state(), s.base + ":force"}, s.args(s.requests, s.failures, ms(s.bucket), s.buckets,
		s.minRequests, strconv.FormatFloat(s.ratio, 'g', -1, 64), ms(s.mostForce), b2i(s.readForce), b2i(s.readTotals))
}

// tripCall is lua/trip.lua.
type tripCall struct {
	breakerArgs
	version int64
}

func (t tripCall) call() (string, []string, []any) {
	return "trip", []string{t.state()}, t.args(t.version)
}

// probeCall is lua/probe.lua.
type probeCall struct {
	breakerArgs
	version int64
	ok      bool
	probes  int
}

func (p probeCall) call() (string, []string, []any) {
	return "probe", []string{p.state()}, p.args(p.version, b2i(p.ok), p.probes)
}

// leaseCall is lua/lease.lua.
type leaseCall struct {
	breakerArgs
	version int64
	probes  int
	life    time.Duration
	holder  string
}

func (l leaseCall) call() (string, []string, []any) {
	return "lease", []string{l.state()}, l.args(l.version, l.probes, ms(l.life), l.holder)
}

// restoreCall is lua/restore.lua.
type restoreCall struct {
	breakerArgs
	version int64
	open    bool
	left    time.Duration
}

func (r restoreCall) call() (string, []string, []any) {
	return "restore", []string{r.state()}, r.args(r.version, b2i(r.open), ms(r.left))
}

// quotaCall is lua/quota.lua. Rates are micro-requests per second.
type quotaCall struct {
	base, holder        string
	limit, demand, ack  int64
	most                int64 // the most this pod takes
	life, longestPause  time.Duration
	lostCap             int64
	period, longestLife time.Duration
	mostFields          int64
}

func (q quotaCall) call() (string, []string, []any) {
	return "quota", []string{q.base + ":quota", q.base + ":pause"}, []any{q.holder, q.limit, q.demand, q.ack,
		q.most, ms(q.life), ms(q.longestPause), q.lostCap, ms(q.period), ms(q.longestLife), q.mostFields}
}

// pauseCall is lua/pause.lua.
type pauseCall struct {
	base, channel, system string
	pause                 time.Duration
}

func (p pauseCall) call() (string, []string, []any) {
	m := message{kind: pauseMessage, system: p.system, ms: ms(p.pause)}
	return "pause", []string{p.base + ":pause"}, []any{p.channel, ms(p.pause), m.Format()}
}

// leaveCall is lua/leave.lua.
type leaveCall struct {
	base, holder string
	limit        int64
}

func (l leaveCall) call() (string, []string, []any) {
	return "leave", []string{l.base + ":quota"}, []any{l.holder, l.limit}
}

// presenceCall is lua/presence.lua.
type presenceCall struct {
	pods, holder string
	life         time.Duration
}

func (p presenceCall) call() (string, []string, []any) {
	return "presence", []string{p.pods}, []any{p.holder, ms(p.life)}
}

// departCall is lua/depart.lua.
type departCall struct{ pods, holder string }

func (d departCall) call() (string, []string, []any) {
	return "depart", []string{d.pods}, []any{d.holder}
}

// Each op replies a list of integers, in the order its file's header
// names them. Its reader is here, beside its call: it checks the list's
// length and reads it into the op's reply type by position; nothing else
// reads a reply by index. What the values mean is checked where they are
// applied (trust.go, quota.go, pace.go): another client may have written
// anything an op read.

// breakerReply is what every op of a breaker replies (lua/breaker.lua):
// the state it leaves in Redis (version, s, ms left open), the values it
// found malformed or cut there, then its own values (own).
type breakerReply struct {
	ver, s, leftMs    int64
	malformed, capped int64
	own               []int64
}

// readBreakerReply reads r, the reply of a breaker's op that has own
// values of its own after the state's.
func readBreakerReply(r []int64, own int) (breakerReply, bool) {
	if len(r) != 5+own {
		return breakerReply{}, false
	}
	return breakerReply{ver: r[0], s: r[1], leftMs: r[2], malformed: r[3], capped: r[4], own: r[5:]}, true
}

// syncReply is lua/sync.lua's own values: the fleet window's requests
// and failures (totalsNotRead both when the window was not read), and the
// operator's override (0 none, 1 open, 2 closed, forceNotRead) with its
// ms left.
type syncReply struct{ requests, failures, force, forceLeftMs int64 }

// syncOwn is how many own values sync replies.
const syncOwn = 4

func readSyncReply(own []int64) syncReply {
	return syncReply{requests: own[0], failures: own[1], force: own[2], forceLeftMs: own[3]}
}

// leaseReply is lua/lease.lua's own value: the lease's number, or 0.
type leaseReply struct{ lease int64 }

// leaseOwn is how many own values lease replies.
const leaseOwn = 1

func readLeaseReply(own []int64) leaseReply { return leaseReply{lease: own[0]} }

// quotaReply is lua/quota.lua's reply: the grant, the live pods, the ms
// left of the upstream's pause, the values malformed and cut, and
// whether the pod found its entry lost (0 or 1).
type quotaReply struct{ grant, pods, pauseMs, malformed, capped, lost int64 }

func readQuotaReply(r []int64) (quotaReply, bool) {
	if len(r) != 6 {
		return quotaReply{}, false
	}
	return quotaReply{grant: r[0], pods: r[1], pauseMs: r[2], malformed: r[3], capped: r[4], lost: r[5]}, true
}

// pauseReply is lua/pause.lua's reply: the ms of the pause in force, and
// the values malformed.
type pauseReply struct{ pauseMs, malformed int64 }

func readPauseReply(r []int64) (pauseReply, bool) {
	if len(r) != 2 {
		return pauseReply{}, false
	}
	return pauseReply{pauseMs: r[0], malformed: r[1]}, true
}

// presenceReply is lua/presence.lua's reply: the pods alive, and the
// entries malformed.
type presenceReply struct{ pods, malformed int64 }

func readPresenceReply(r []int64) (presenceReply, bool) {
	if len(r) != 2 {
		return presenceReply{}, false
	}
	return presenceReply{pods: r[0], malformed: r[1]}, true
}
