package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// Config says where the fleet's Redis is and how often to talk to it.
// Only RedisURL and Namespace are required; the zero value of every other
// field is its default.
type Config struct {
	// RedisURL is a redis:// or rediss:// URL (OUTBOUND_FLEET_REDIS_URL).
	// Its password is redacted in every error and status.
	RedisURL string
	// Namespace prefixes every key and channel (OUTBOUND_FLEET_NAMESPACE),
	// so that two services sharing one Redis never share a breaker or a
	// quota.
	Namespace string
	// FlushInterval is the loop's tick: how often the pod's counts are
	// added to the fleet's window, when they changed, and each quota at
	// scope fleet asks for its share. Zero: 200ms.
	FlushInterval time.Duration
	// ReadInterval is how often the state (and an operator's override) is
	// read back when nothing was flushed, to catch a missed message. A
	// share of a quota holds for max(4 x FlushInterval, ReadInterval) +
	// Timeout without a new grant. Zero: 1s.
	ReadInterval time.Duration
	// Timeout bounds each round trip to Redis. Zero: 100ms. When round
	// trips fail for 3 x Timeout (not one slow round trip on a busy
	// machine), or Redis refuses a command, or the subscription breaks,
	// the fleet is degraded: every breaker local.
	Timeout time.Duration
	// Logger is told when the fleet loses sync with Redis (with the
	// cause), when it is back, and once a minute while it stays degraded:
	// never a record per failed round trip. Nil: the fleet logs through
	// the logger of the registry it serves (registry.WithLogger), so that
	// a service wires one logger; with neither, nothing is logged, and
	// Sync and the registry's Status say it all. go-redis's own log (a failed
	// dial) never reaches the process's standard error.
	Logger *slog.Logger

	remindEvery time.Duration // tests: how often a degraded fleet says so again
}

// Fleet keeps the breakers of a registry's systems at scope fleet in sync
// with the other pods' over one Redis: one goroutine flushes counts and
// reads state, another applies published changes. Calls never wait on
// it. A Fleet is safe for concurrent use; Close stops both goroutines.
type Fleet struct {
	cfg     Config
	log     atomic.Pointer[slog.Logger] // Config.Logger, else the registry's (useLogger); nil: silent
	url     string                      // RedisURL redacted
	rdb     redis.UniversalClient       // a *redis.Client, or a *redis.ClusterClient
	batch   *redis.Script               // the batch script for rdb (batch.go)
	ps      *redis.PubSub
	channel string
	prefix  string // of the keys of no system: outbound:fleet:<namespace>
	podsKey string // the pods alive (pace.go)
	holder  string // this pod's name on its leases

	synced     atomic.Bool
	subscribed atomic.Bool   // the listener receives the channel
	malformed  atomic.Uint64 // values read that were malformed or out of range
	capped     atomic.Uint64 // open times read past now + BREAKER_OPEN_TIMEOUT
	readSoon   atomic.Bool   // read every state on the next round trip
	reads      atomic.Uint64 // round trips that read every state back
	tickNs     atomic.Int64  // the loop's tick (pace.go)
	podsSeen   atomic.Int64  // the pods alive, last counted (pace.go)
	// failingSince is when the round trips began to fail, zero while they
	// succeed (the loop's alone).
	failingSince time.Time
	presentAt    time.Time // when this pod last said it is alive (the loop's alone)
	wakeCh       chan struct{}
	cancel       context.CancelFunc
	done         sync.WaitGroup

	mu           sync.Mutex
	circuits     map[string]*circuit
	quotas       map[string]*quota
	since        time.Time // of the current sync state
	lastErr      string
	closed       bool
	toldDegraded bool      // the log was told of the degraded state, not yet of its end
	toldAt       time.Time // when the log was last told of it
}

// New connects to the fleet's Redis and starts syncing. A Redis that does
// not answer is not an error: the fleet starts degraded (every breaker
// local) and syncs once Redis answers. ctx bounds nothing after New
// returns; Close stops the fleet.
func New(ctx context.Context, cfg Config) (*Fleet, error) {
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 200 * time.Millisecond
	}
	if cfg.ReadInterval <= 0 {
		cfg.ReadInterval = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	if cfg.remindEvery <= 0 {
		cfg.remindEvery = remindEvery
	}
	rdb, err := newClient(&cfg)
	if err != nil {
		return nil, err
	}
	var id [6]byte
	rand.Read(id[:])
	f := &Fleet{
		cfg:      cfg,
		url:      redactedURL(cfg),
		rdb:      rdb,
		batch:    batchScript,
		channel:  channelOf(cfg.Namespace),
		prefix:   "outbound:fleet:" + cfg.Namespace,
		podsKey:  "outbound:fleet:{" + cfg.Namespace + "}:pods",
		holder:   hex.EncodeToString(id[:]),
		wakeCh:   make(chan struct{}, 1),
		circuits: map[string]*circuit{},
		quotas:   map[string]*quota{},
		since:    time.Now(),
	}
	f.log.Store(cfg.Logger)
	if _, ok := rdb.(*redis.ClusterClient); ok {
		f.batch = clusterBatchScript
	}
	f.tickNs.Store(int64(cfg.FlushInterval))
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := f.rdb.Ping(pctx).Err(); err != nil {
		f.lastErr = f.clean(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	f.cancel = stop
	f.ps = f.rdb.Subscribe(runCtx) // subscribes in listen, where errors are seen
	f.done.Add(2)
	go f.loop(runCtx)
	go f.listen(runCtx)
	return f, nil
}

// FromEnv is [New] with the settings of OUTBOUND_FLEET_REDIS_URL and
// OUTBOUND_FLEET_NAMESPACE, checked by the rules config.Load applies, and
// opts for what the environment does not say. When
// OUTBOUND_FLEET_REDIS_URL is unset it returns a nil *Fleet and no error:
// its Option and Close do nothing, and a registry with a system at scope
// fleet then refuses to build.
func FromEnv(ctx context.Context, opts ...EnvOption) (*Fleet, error) {
	fc, err := config.LoadFleet()
	if err != nil {
		return nil, err
	}
	if fc.RedisURL == "" {
		return nil, nil
	}
	cfg := Config{RedisURL: fc.RedisURL, Namespace: fc.Namespace}
	for _, o := range opts {
		o.apply(&cfg)
	}
	return New(ctx, cfg)
}

// EnvOption sets, for [FromEnv], a field of Config that no environment
// variable sets.
type EnvOption interface{ apply(*Config) }

type loggerOption struct{ l *slog.Logger }

func (o loggerOption) apply(c *Config) { c.Logger = o.l }

// WithLogger is Config.Logger for [FromEnv]: the logger told when the
// fleet loses sync with Redis and when it is back.
func WithLogger(l *slog.Logger) EnvOption { return loggerOption{l} }

// Close stops syncing, gives this pod's shares of the fleet's quotas
// back, and closes the connections to Redis. The breakers keep working,
// each on its own (local), and each quota at limit / pods last seen.
// Close is idempotent.
func (f *Fleet) Close() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	f.synced.Store(false)
	f.cancel()
	f.ps.Close()
	f.done.Wait()
	f.showAll() // every breaker local from now on
	f.release()
	return f.rdb.Close()
}

// release gives this pod's shares back to the fleet at once (rather than
// when they expire), and takes it out of the count of pods, best effort
// within Config.Timeout, and leaves each quota at limit / pods last seen:
// nothing will grant it again.
func (f *Fleet) release() {
	quotas := f.quotaSnapshot()
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
	defer cancel()
	ignore := func([]int64, error) {}
	ops := []*op{newOp(departCall{pods: f.podsKey, holder: f.holder}, ignore, nil)}
	for _, q := range quotas {
		ops = append(ops, newOp(leaveCall{base: q.base, holder: f.holder, limit: q.limit}, ignore, nil))
		q.closeQuota()
	}
	pipe := f.rdb.Pipeline()
	f.send(ctx, pipe, ops)
	pipe.Exec(ctx) // a Redis that does not answer lets the share expire
}

// wake asks the loop to run now (a trip, a probe, a lease wanted).
func (f *Fleet) wake() {
	select {
	case f.wakeCh <- struct{}{}:
	default:
	}
}

// clean renders a Redis error without the URL's password.
func (f *Fleet) clean(err error) string {
	s := err.Error()
	if f.cfg.RedisURL != "" {
		s = strings.ReplaceAll(s, f.cfg.RedisURL, f.url)
	}
	return printable(s)
}

// redactedURL is cfg's RedisURL as errors and Status show it (the core's
// config.Fleet.RedactedURL).
func redactedURL(cfg Config) string {
	return config.Fleet{RedisURL: cfg.RedisURL, Namespace: cfg.Namespace}.RedactedURL()
}

// printable returns s as it is when every rune of it is printable, and
// otherwise Go-quoted, so that a message from Redis cannot start a new
// line of a log or steer a terminal. Invalid UTF-8 counts as not
// printable.
func printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// SystemStatus is the fleet's view of one system.
type SystemStatus struct {
	System string `json:"system"`
	// State is the fleet's state as this pod knows it: closed, open or
	// half-open.
	State string `json:"state"`
	// Version counts the fleet's changes of state of the system.
	Version int64 `json:"version"`
	// OpenUntil is when an open state lets probes through.
	OpenUntil time.Time `json:"open_until,omitzero"`
	// Requests and Failures are the fleet's window as last read: at most
	// half of BREAKER_WINDOW old, and read at every sync of failures.
	Requests uint64 `json:"requests"`
	Failures uint64 `json:"failures"`
}

// Systems returns the fleet's view of each system at scope fleet, sorted
// by name.
func (f *Fleet) Systems() []SystemStatus {
	var out []SystemStatus
	for _, c := range f.snapshot() {
		v := c.view.Load()
		st := SystemStatus{System: c.name, Version: v.ver, State: "closed"}
		if v.open {
			st.State, st.OpenUntil = "open", v.until
			if !time.Now().Before(v.until) {
				st.State = "half-open"
			}
		}
		c.mu.Lock()
		st.Requests, st.Failures = c.totals[0], c.totals[1]
		c.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// errClosed refuses a system added to a closed fleet.
var errClosed = errors.New("fleet: closed")

// Option installs the fleet in a registry: every system whose
// BREAKER_SCOPE is fleet gets a breaker shared with the fleet, wrapping its
// own. One Fleet serves one registry (a system name may join it once). On
// a nil *Fleet (FromEnv with no Redis URL) the option installs nothing,
// and a registry with a system at scope fleet refuses to build.
func (f *Fleet) Option() registry.Option {
	if f == nil {
		return registry.WithFleet(nil)
	}
	return registry.WithFleet(seam{f})
}

// seam is the fleet as the registry sees it: a registry.BreakerFleet and
// a registry.QuotaFleet, which the registry asks for SharedBreakers and
// SharedQuotas.
type seam struct{ f *Fleet }

// SharedBreaker makes local, the registry's breaker of sys, a fleet
// breaker; what it tells the registry goes to sys.States and sys.Forces.
func (s seam) SharedBreaker(sys registry.FleetSystem, local registry.LocalBreaker) (registry.SharedBreaker, error) {
	s.f.useLogger(sys.Logger)
	if sys.Judge == nil {
		return nil, fmt.Errorf("fleet: system %q: the registry gave no Judge", sys.Name)
	}
	c := sys.Settings
	return s.f.add(settings{
		system: sys.Name, minRequests: c.BreakerMinRequests, ratio: c.BreakerFailureRatio, window: c.BreakerWindow,
		openTimeout: c.BreakerOpenTimeout, probes: c.BreakerHalfOpenProbes, callTimeout: c.CallTimeout,
	}, local, reports{judge: sys.Judge, states: sys.States, forces: sys.Forces})
}

// SharedQuota gives the system its share of the fleet's quota, in place
// of local (the registry's own token bucket, unused at scope fleet); the
// pauses it learns from other pods go to sys.Pauses.
func (s seam) SharedQuota(sys registry.FleetSystem, _ registry.SharedQuota) (registry.SharedQuota, error) {
	s.f.useLogger(sys.Logger)
	r := sys.Settings.Rate()
	if !r.Limited() {
		return nil, fmt.Errorf("fleet: system %q: %w", sys.Name, errNoRate)
	}
	return s.f.addQuota(sys.Name, r, min(sys.Settings.CallTimeout, maxPause), sys.Pauses)
}

// Circuit and Quota are the seam a registry without SharedBreaker and
// SharedQuota asks for (registry.Fleet). This fleet gives neither: a
// registry that asks is older than this module needs.
//
//lint:ignore SA1019 the method an older registry's Fleet names, refused here
func (s seam) Circuit(sys registry.FleetSystem, _ registry.Circuit) (registry.Circuit, error) {
	return nil, fmt.Errorf("fleet: system %q: %w", sys.Name, errOldRegistry)
}

//lint:ignore SA1019 the method an older registry's Fleet names, refused here
func (s seam) Quota(sys registry.FleetSystem, _ registry.Quota) (registry.Quota, error) {
	return nil, fmt.Errorf("fleet: system %q: %w", sys.Name, errOldRegistry)
}

// errOldRegistry refuses a registry that asks for the old seam.
var errOldRegistry = errors.New("the registry asked for a Circuit or a Quota; this fleet shares registry.SharedBreaker and registry.SharedQuota: require a github.com/outbound-go/outbound that has them")

// reports is what the registry gave a fleet breaker: how to count an
// outcome, and where its changes of state and the overrides learned from
// other pods go (nil: nobody listens).
type reports struct {
	judge  func(error) observe.Verdict
	states func(from, to observe.BreakerState)
	forces func(state observe.BreakerState, until time.Time)
}

// add makes local, the registry's breaker of system, a fleet breaker.
func (f *Fleet) add(s settings, local registry.LocalBreaker, to reports) (*circuit, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errClosed
	}
	if _, dup := f.circuits[s.system]; dup {
		return nil, fmt.Errorf("fleet: system %q is already in this fleet (one Fleet per registry)", s.system)
	}
	c := newCircuit(f, s, local, to)
	f.circuits[s.system] = c
	f.wake()
	return c, nil
}

// newCircuit is the fleet breaker of system on f, standing in for local.
//
// Its leases keep the promise of at most HALF_OPEN_PROBES probes in the
// fleet per half-open round, measured from when the lease was asked for
// (Redis takes it later): a grant admits probes for grantLife, each runs
// at most CALL_TIMEOUT, and the lease lives grantLife + CALL_TIMEOUT, so
// no lease expires under a probe it admitted. grantLife is at most
// BREAKER_OPEN_TIMEOUT: the next round opens after Redis took the lease
// and turns half-open BREAKER_OPEN_TIMEOUT later, so a grant of a round
// that ended cannot send a probe into the next one, even on a pod that
// has not heard of it.
func newCircuit(f *Fleet, s settings, local registry.LocalBreaker, to reports) *circuit {
	grantLife := min(s.callTimeout, s.openTimeout)
	c := &circuit{
		f: f, name: s.system, base: keyBase(f.cfg.Namespace, s.system), local: local,
		judge: to.judge, report: to.states, forceReport: to.forces,
		window: s.window, openTimeout: s.openTimeout,
		probes: s.probes, lease: grantLife + s.callTimeout, grantLife: grantLife,
	}
	c.SetRule(s.ratio, s.minRequests)
	c.view.Store(&view{})
	return c
}

// settings are the breaker settings a fleet breaker shares with the
// fleet (from config.Client), and its system's name.
type settings struct {
	system      string
	minRequests int
	ratio       float64
	window      time.Duration
	openTimeout time.Duration
	probes      int
	callTimeout time.Duration
}

// quotaSnapshot returns the quotas, in no order.
func (f *Fleet) quotaSnapshot() []*quota {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*quota, 0, len(f.quotas))
	for _, q := range f.quotas {
		out = append(out, q)
	}
	return out
}

// snapshot returns the circuits, sorted by name.
func (f *Fleet) snapshot() []*circuit {
	f.mu.Lock()
	out := make([]*circuit, 0, len(f.circuits))
	for _, c := range f.circuits {
		out = append(out, c)
	}
	f.mu.Unlock()
	sortCircuits(out)
	return out
}
