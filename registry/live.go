package registry

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/ratelimit"
	"github.com/outbound-go/outbound/observe"
)

// This file is live settings: OUTBOUND_CONFIG_FILE names a file of
// KEY=VALUE lines, read at start over the process environment and then
// looked at again every second. A change is loaded and validated whole,
// with the rules and the report of the start; a valid one is applied
// system by system between calls, an invalid one is refused whole and
// reported, and watching goes on.
//
// The file is polled, not watched with inotify (fsnotify): a read of a
// small file a second costs a few microseconds of CPU
// (BenchmarkSettingsPoll), polling sees an edit in place, a rename into
// place and a Kubernetes ConfigMap volume's swap of its ..data symlink
// alike, and it can miss no event, so no pod stays on old settings for
// want of one. It adds no dependency to the core.

// DefaultReloadInterval is how often the settings file is read.
const DefaultReloadInterval = time.Second

// WithReloadInterval sets how often the settings file of
// OUTBOUND_CONFIG_FILE is read (default [DefaultReloadInterval]). It
// changes nothing for a registry without one.
func WithReloadInterval(d time.Duration) Option {
	return optionFunc(func(o *options) { o.reloadEvery = d })
}

// settingsFile is the watch of a registry's settings file.
type settingsFile struct {
	path    string
	env     map[string]string // the process environment at start
	systems []config.System
	fleet   config.Fleet // the fleet's settings at start: fixed
	logger  func(msg string, args ...any)

	mu     sync.Mutex // serialises reloads; guards the fields below
	seen   string     // the version last looked at, applied or refused
	status observe.SettingsStatus

	stop chan struct{}
	done chan struct{}
}

// fromEnvWithFile builds the registry of systems from env with the
// settings file at path laid over it, and starts watching the file.
func fromEnvWithFile(path string, env map[string]string, systems []config.System, opts []Option) (*Registry, error) {
	f, err := config.ReadFile(path)
	if err != nil {
		return nil, err
	}
	merged := f.Over(env)
	loaded, err := config.LoadEnv(merged, systems...)
	if err != nil {
		return nil, err
	}
	r, err := New(loaded, opts...)
	if err != nil {
		return nil, err
	}
	fleet, _ := config.LoadFleetEnv(merged)
	sf := &settingsFile{path: path, env: env, systems: slices.Clone(systems), fleet: fleet,
		seen: f.Version, stop: make(chan struct{}), done: make(chan struct{})}
	sf.status = observe.SettingsStatus{File: path, Version: f.Version, AppliedAt: time.Now()}
	if r.opts.logger != nil {
		sf.logger = r.opts.logger.Warn
	}
	r.settings = sf
	every := r.opts.reloadEvery
	if every <= 0 {
		every = DefaultReloadInterval
	}
	go r.watchSettings(every)
	return r, nil
}

// watchSettings reads the settings file every interval until the
// registry is closed, and reloads it when its content changed.
func (r *Registry) watchSettings(every time.Duration) {
	defer close(r.settings.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.settings.stop:
			return
		case <-t.C:
			_ = r.reload(false)
		}
	}
}

// Reload reads the settings file of OUTBOUND_CONFIG_FILE now and applies
// it, as the watch does every second: for a SIGHUP handler of the
// service's own (outbound installs none). It returns nil when the file
// was applied or had not changed, or the error that refused it: a
// *config.Error listing every problem, or one saying that the change
// needs a restart. A registry without a settings file returns an error
// matching [ErrNoSettingsFile].
func (r *Registry) Reload() error { return r.reload(true) }

// ErrNoSettingsFile is the error of [Registry.Reload] on a registry built
// without OUTBOUND_CONFIG_FILE.
var ErrNoSettingsFile = errors.New("outbound: no settings file (" + config.FileVar + ")")

func (r *Registry) reload(asked bool) error {
	sf := r.settings
	if sf == nil {
		return ErrNoSettingsFile
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	data, err := os.ReadFile(sf.path)
	if err != nil {
		return sf.refuse("read:"+err.Error(), "", fmt.Errorf("%s=%s: %w", config.FileVar, sf.path, err))
	}
	if config.FileVersion(data) == sf.seen && !asked {
		return nil // unchanged: already applied, or already refused
	}
	f, err := config.ParseFile(sf.path, data)
	if err != nil {
		return sf.refuse(f.Version, f.Version, err)
	}
	env := f.Over(sf.env)
	loaded, err := config.LoadEnv(env, sf.systems...)
	if err == nil {
		err = r.fixed(env, loaded)
	}
	if err != nil {
		return sf.refuse(f.Version, f.Version, err)
	}
	if f.Version == sf.status.Version {
		sf.seen, sf.status.Refused = f.Version, nil // back to what is in force
		return nil
	}
	for _, l := range loaded {
		r.clients[l.Name].apply(l)
	}
	sf.seen = f.Version
	sf.status.Version, sf.status.AppliedAt, sf.status.Refused = f.Version, time.Now(), nil
	sf.status.Applied++
	return nil
}

// refuse records a refused change of the file (seen: what not to look at
// again until it changes) and logs it once.
func (sf *settingsFile) refuse(seen, version string, err error) error {
	if sf.seen == seen && sf.status.Refused != nil {
		return err // told already
	}
	sf.seen = seen
	sf.status.Refusals++
	sf.status.Refused = &observe.SettingsRefusal{Version: version, At: time.Now(), Reason: err.Error()}
	if sf.logger != nil {
		sf.logger("outbound settings file refused whole; the settings in force stay", "outbound.settings.file", sf.path,
			"outbound.settings.version", version, "outbound.settings.reason", err.Error())
	}
	return err
}

// fixed returns why loaded, the settings of a change, cannot be applied
// while the service runs, or nil: the set of systems and the fleet's
// Redis settings are fixed at start, and so are the settings each client
// was built on ([Client.needsRestart]).
func (r *Registry) fixed(env map[string]string, loaded []config.Loaded) error {
	names := make([]string, len(loaded))
	for i, l := range loaded {
		names[i] = l.Name
	}
	if !slices.Equal(names, r.names) {
		return fmt.Errorf("the systems are %s, the file makes them %s: adding or removing a system needs a restart",
			strings.Join(r.names, ","), strings.Join(names, ","))
	}
	if fleet, _ := config.LoadFleetEnv(env); fleet != r.settings.fleet {
		return errors.New("the fleet's Redis settings (" + config.FleetRedisURLVar + ", " + config.FleetNamespaceVar + ") changed: they need a restart")
	}
	var fixed []string
	for _, l := range loaded {
		fixed = append(fixed, r.clients[l.Name].needsRestart(l)...)
	}
	if len(fixed) > 0 {
		return fmt.Errorf("%s changed: applied only at start, so the change needs a restart (nothing of it was applied)",
			strings.Join(fixed, ", "))
	}
	return nil
}

// liveSettings are the settings a change applies while the service
// runs, some of them only in some cases (needsRestart says which):
// MAX_CONCURRENT up to what it was at start; RATE_LIMIT and RATE_BURST
// at either scope (at fleet, the fleet shares the new limit within a
// sync or two: a Quota's SetRate); the breaker's ratio and minimum (its
// state and counts stay; a fleet's takes them by SetRule); its window,
// open timeout and probes at BREAKER_SCOPE=local (a breaker of them takes
// over: localCircuit.retune); CALL_TIMEOUT at BREAKER_SCOPE=local. Every
// other setting is fixed at start.
var liveSettings = map[string]bool{
	"CallTimeout": true, "ReadTimeout": true, "Retries": true, "BackoffBase": true, "BackoffMax": true,
	"RetryAfterMax": true, "OmitTimeBudget": true, "HedgeDelay": true, "HedgeMax": true, "HedgeDelayMin": true,
	"HedgeDelayMax": true, "RateLimit": true, "RateBurst": true, "RateMaxWait": true,
	"BreakerFailureRatio": true, "BreakerMinRequests": true,
	"BreakerWindow": true, "BreakerOpenTimeout": true, "BreakerHalfOpenProbes": true,
	"ConnectTimeout": true, "TLSHandshakeTimeout": true, "IdleConnTimeout": true,
	"FollowRedirects": true, "MaxRedirects": true,
}

// needsRestart names the variables of l that differ from the settings in
// force and cannot change while the service runs: BASE_URL, the pool's
// size, an adaptive bulkhead or a MAX_CONCURRENT above the one at
// start, the breaker's window, open timeout and probes and CALL_TIMEOUT
// at scope fleet (and its ratio and minimum with a fleet that cannot
// take them), the retry budget's settings, the scopes, TLS and drills;
// and, at scope fleet, which routes have a breaker or a limit of their
// own and a route's own breaker settings (a route's limit itself changes
// live, as the system's).
func (c *Client) needsRestart(l config.Loaded) []string {
	old := c.pol.Load().l
	was := make(map[string]string)
	for _, v := range old.Vars() {
		was[v.Setting] = v.Value
	}
	var out []string
	for _, v := range l.Vars() {
		live := liveSettings[v.Setting]
		switch v.Setting {
		case "RateLimit", "RateBurst":
			live = c.ratesSettable()
		case "BreakerFailureRatio", "BreakerMinRequests":
			// The pod's own breakers take a new rule (breaker.Rule); a
			// fleet's does when it has SetRule.
			live = l.Client.BreakerScope == "local" || c.rulesSettable()
		case "CallTimeout":
			// A fleet's half-open probe holds a lease in Redis that its
			// fleet sized by CALL_TIMEOUT at start: a longer call could
			// outlive it, and let one probe more into the round.
			live = l.Client.BreakerScope == "local"
		case "BreakerWindow", "BreakerOpenTimeout", "BreakerHalfOpenProbes":
			// The pod's own breakers are taken over by one of the new
			// settings (localCircuit.retune); the pods of a fleet agree on
			// them from the start.
			live = l.Client.BreakerScope == "local"
		case "MaxConcurrent":
			// A fixed bulkhead's limit moves under its capacity; the pool
			// keeps the size it was built with.
			live = !c.bh.Adaptive() && int64(l.Client.MaxConcurrent) <= c.bh.Capacity()
		}
		if !live && was[v.Setting] != v.Value {
			out = append(out, v.Name)
		}
	}
	own := func(ls config.Loaded) map[string]string {
		m := map[string]string{}
		for _, r := range ls.Routes {
			rc := r.Client
			m[r.Name] = fmt.Sprint(r.OwnBreaker, r.Rate().Limited(), rc.BreakerWindow, rc.BreakerOpenTimeout,
				rc.BreakerHalfOpenProbes, rc.CallTimeout)
			if !c.rulesSettable() {
				m[r.Name] += fmt.Sprint(rc.BreakerFailureRatio, rc.BreakerMinRequests)
			}
		}
		return m
	}
	fleet := l.Client.BreakerScope == "fleet" || l.Client.RateScope == "fleet"
	if fleet && !maps.Equal(own(old), own(l)) {
		out = append(out, l.Prefix+"_ROUTES (which routes have a breaker or a limit of their own, at scope fleet)")
	}
	rates := func(ls config.Loaded) map[string]config.Rate {
		m := map[string]config.Rate{}
		for _, r := range ls.Routes {
			m[r.Name] = r.Rate()
		}
		return m
	}
	if !c.ratesSettable() && !maps.Equal(rates(old), rates(l)) {
		out = append(out, l.Prefix+"_ROUTES (a route's own limit, which this build's fleet cannot change while it runs)")
	}
	return out
}

// rulesSettable reports whether every breaker of the client that is
// not its own (a fleet's: the system's, and its routes' own) can take a
// new rule while it runs: a fleet module built before live rule changes
// gives breakers that cannot.
func (c *Client) rulesSettable() bool {
	ok := ruleSettable(c.cb)
	for _, r := range c.pol.Load().routeList() {
		ok = ok && (!r.own || ruleSettable(r.cb))
	}
	return ok
}

// ratesSettable reports whether every quota of the client (the
// system's, and its routes') can take a new rate while it runs: a fleet
// module built before live rate changes gives quotas that cannot.
func (c *Client) ratesSettable() bool {
	ps := c.pol.Load()
	ok := settable(ps.quota)
	for _, r := range ps.routeList() {
		ok = ok && settable(r.quota)
	}
	return ok
}

// apply makes l the client's settings for the calls that begin from now
// on: the breakers, the pool, the permits and the tokens stay; a call in
// flight finishes under the settings it began with.
func (c *Client) apply(l config.Loaded) {
	c.live.Lock()
	defer c.live.Unlock()
	old := c.pol.Load()
	quota := old.quota
	if r := l.Client.Rate(); old.l.Client.Rate() != r {
		switch {
		case !r.Limited():
			quota = nil
		case quota != nil:
			// The tokens carry over; a fleet's share follows on its next
			// sync. A quota without SetRate has refused the change
			// (needsRestart).
			quota.(rateSetter).SetRate(r)
		default:
			quota = ratelimit.NewLocal(r)
		}
	}
	if n := int64(l.Client.MaxConcurrent); n != int64(old.l.Client.MaxConcurrent) {
		_ = c.bh.SetLimit(n) // in range: needsRestart said so
	}
	ps, err := c.policies(l, quota, old)
	if err != nil {
		// Only a fleet refuses a route's breaker or limit, and a change
		// of those at scope fleet needs a restart (needsRestart).
		return
	}
	c.rule.Set(l.Client)
	setRule(c.cb, l.Client)
	for _, r := range ps.routeList() {
		if r.rule != nil {
			r.rule.Set(r.cfg)
			setRule(r.cb, r.cfg)
		}
	}
	c.pol.Store(ps)
	if lc, ok := c.cb.(*localCircuit); ok {
		lc.retune(l.Client) // after the rule: a takeover judges by the new one
	}
	if ps.pool != old.pool {
		c.retire(old.pool, longestCall(old.l))
	}
}

// retiredPool is a pool that a change of connection settings replaced.
// Its calls in flight finish on it; its idle connections are closed at
// once, those of the calls that end later once the longest of them may
// have (its CALL_TIMEOUT), or at Close.
type retiredPool struct {
	transport *http.Transport
	timer     *time.Timer
	closed    atomic.Bool // the timer has closed its connections
}

// retire drains p, whose calls last at most d. c.live is held.
func (c *Client) retire(p *pool, d time.Duration) {
	p.transport.CloseIdleConnections()
	rp := &retiredPool{transport: p.transport}
	rp.timer = time.AfterFunc(d, func() {
		rp.transport.CloseIdleConnections()
		rp.closed.Store(true)
	})
	c.retired = slices.DeleteFunc(c.retired, func(rp *retiredPool) bool { return rp.closed.Load() })
	c.retired = append(c.retired, rp)
}

// closeIdle closes the idle connections of the client's pool and of the
// pools it retired.
func (c *Client) closeIdle() {
	c.pol.Load().pool.transport.CloseIdleConnections()
	c.live.Lock()
	defer c.live.Unlock()
	for _, rp := range c.retired {
		rp.timer.Stop()
		rp.transport.CloseIdleConnections()
	}
	c.retired = nil
}

// longestCall is the longest CALL_TIMEOUT of l's system and routes.
func longestCall(l config.Loaded) time.Duration {
	d := l.Client.CallTimeout
	for _, r := range l.Routes {
		d = max(d, r.Client.CallTimeout)
	}
	return d
}

// Settings returns the state of the registry's settings file: the
// version applied and when, and the last change refused (nil when the
// last change was applied). The zero value without OUTBOUND_CONFIG_FILE.
func (r *Registry) Settings() observe.SettingsStatus {
	if r.settings == nil {
		return observe.SettingsStatus{}
	}
	r.settings.mu.Lock()
	defer r.settings.mu.Unlock()
	st := r.settings.status
	if st.Refused != nil {
		ref := *st.Refused
		st.Refused = &ref
	}
	return st
}

// stopSettings ends the watch of the settings file, if any, and waits for
// it.
func (r *Registry) stopSettings() {
	if r.settings == nil {
		return
	}
	r.stopOnce.Do(func() { close(r.settings.stop) })
	<-r.settings.done
}

// processEnv is the process environment as a map.
func processEnv() map[string]string {
	environ := os.Environ()
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}
