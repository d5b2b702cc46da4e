package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// An operator's override of a system's breaker at scope fleet
// (registry.Client.Force, or [Force] without a registry) is the key
// <base>:force, whose value is the state ("open" or "closed") and whose
// time to live is the time left: it ends by itself, and a pod that starts
// meanwhile reads it. Every change is published on the fleet's channel as
// "<system> force <open|closed|-> <ms left>" ("-": released), and every
// pod reads the key back with the periodic read of every state
// (lua/sync.lua): every Config.ReadInterval, or two ticks in a large
// fleet (pace.go).

// forced is an override as this pod knows it.
type forced struct {
	state   observe.BreakerState // "" when none
	until   time.Time
	learned time.Time // when this pod learned it
}

// Force writes the operator's override of the system's breaker for every
// pod (registry.SharedBreaker): state open or closed until until, or "" to
// release it. It fails, and this pod's view goes back to what it was,
// when Redis does not take it within a second.
func (c *circuit) Force(state observe.BreakerState, until time.Time) error {
	ms, err := forceMillis(state, until, time.Now())
	if err != nil {
		return fmt.Errorf("fleet: system %q: %w", c.name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(c.f.cfg.Timeout, forceTimeout))
	defer cancel()
	// The pod's view changes first, so that the message of this write,
	// which may arrive before the write returns, is not news to it (the
	// registry tells the observers of its own Force).
	prev := c.forced.Load()
	mine := c.setForced(state, ms, time.Now())
	if err := (forceTarget{c.base, c.f.channel, c.name}).write(ctx, c.f.rdb, state, ms); err != nil {
		c.forced.CompareAndSwap(mine, prev) // unless news came meanwhile
		return fmt.Errorf("fleet: system %q: forcing the breaker: %w", c.name, redisError{msg: c.f.clean(err), err: err})
	}
	return nil
}

// learnForced makes state, for ms from now, the override this pod knows,
// as read from Redis or the channel, and tells the observers when it is
// news: another state, or an end moved by more than forceNews (a
// renewal); the periodic read of an override this pod knows, or the
// message of its own Force, is not.
//
// The same override learned again (its end moved by forceNews at most: a
// periodic read, the message of a write this pod already knows) keeps
// the sooner of the two ends: a message delivered late, or a reply read
// late, must not hold the override past the end Redis gives it.
func (c *circuit) learnForced(state observe.BreakerState, ms int64, now time.Time) {
	prev := c.forced.Load()
	if prev != nil && state != "" && prev.state == state {
		if d := now.Add(time.Duration(ms) * time.Millisecond).Sub(prev.until); d.Abs() <= forceNews {
			if d < 0 {
				c.setForced(state, ms, now)
			}
			return
		}
	}
	cur := c.setForced(state, ms, now)
	if prev == nil && state == "" {
		return
	}
	if prev != nil && prev.state == cur.state && cur.until.Sub(prev.until).Abs() <= forceNews {
		return
	}
	if c.forceReport != nil {
		c.forceReport(cur.state, cur.until)
	}
}

// forceNews is how far an override's end must move for a pod to tell its
// observers of a renewal: more than the drift between two reads of one
// override's time to live.
const forceNews = time.Second

// forceTimeout bounds the write of an override: an operator's command,
// not a round trip of the loop.
const forceTimeout = time.Second

// Forced returns the override in force as this pod knows it ("" when
// none) and when it ends (registry.SharedBreaker): one atomic load.
func (c *circuit) Forced() (observe.BreakerState, time.Time) {
	if f := c.forced.Load(); f != nil {
		return f.state, f.until
	}
	return "", time.Time{}
}

// setForced makes state, for ms from now, the override this pod knows,
// and returns it.
func (c *circuit) setForced(state observe.BreakerState, ms int64, now time.Time) *forced {
	f := &forced{state: state, learned: now}
	if state != "" {
		f.until = now.Add(time.Duration(ms) * time.Millisecond)
	}
	c.forced.Store(f)
	return f
}

// readForced applies the override a sync reply read (fs: 0 none, 1 open,
// 2 closed; fms: ms left), unless this pod learned of a change after the
// read was sent (a message, or its own Force). A value no pod writes is
// ignored (malformed); an override past observe.MaxForce is cut to it (capped).
func (c *circuit) readForced(fs, fms int64, sent, _ time.Time) {
	state, ok := forcedStates[fs]
	if !ok || fms < 0 || (fs == 0 && fms != 0) {
		c.f.malformed.Add(1)
		return
	}
	if fms > observe.MaxForce.Milliseconds() {
		c.f.capped.Add(1)
		fms = observe.MaxForce.Milliseconds()
	}
	if cur := c.forced.Load(); cur != nil && cur.learned.After(sent) {
		return
	}
	if cur, _ := c.Forced(); cur == "" && state == "" {
		return
	}
	// The time left was read after sent: counted from sent, the end is
	// never later than Redis's.
	c.learnForced(state, fms, sent)
}

// forcedStates are the states of an override as lua/sync.lua replies them.
var forcedStates = map[int64]observe.BreakerState{0: "", 1: observe.BreakerOpen, 2: observe.BreakerClosed}

// onForce applies an override's message from the channel.
func (f *Fleet) onForce(m message) {
	ms, state := m.ms, m.force
	if ms < 0 {
		f.malformed.Add(1)
		return
	}
	if ms > observe.MaxForce.Milliseconds() {
		f.capped.Add(1)
		ms = observe.MaxForce.Milliseconds()
	}
	f.mu.Lock()
	c := f.circuits[m.system]
	f.mu.Unlock()
	if c != nil {
		c.learnForced(state, ms, time.Now())
	}
}

// forceMillis checks an override: state open or closed until until, in
// (now, now + observe.MaxForce], or "" (released). It returns the ms left.
func forceMillis(state observe.BreakerState, until, now time.Time) (int64, error) {
	switch state {
	case "":
		return 0, nil
	case observe.BreakerOpen, observe.BreakerClosed:
	default:
		return 0, fmt.Errorf("a breaker is forced open or closed, not %q", state)
	}
	d := until.Sub(now)
	if d < time.Millisecond || d > observe.MaxForce {
		return 0, fmt.Errorf("a breaker is forced until a time from now to %v from now, not %v from now", observe.MaxForce, d.Round(time.Millisecond))
	}
	return d.Milliseconds(), nil
}

// forceTarget is where an override of one system goes: the system's
// keys (base) and the fleet's channel.
type forceTarget struct{ base, channel, system string }

// write writes and publishes an override of ms milliseconds (state "":
// released).
func (t forceTarget) write(ctx context.Context, rdb redis.Scripter, state observe.BreakerState, ms int64) error {
	m := message{kind: forceMessage, system: t.system, force: state, ms: ms}
	return forceScript.Run(ctx, rdb, []string{t.base + ":force"}, t.channel, string(state), ms, m.Format()).Err()
}

// Force forces the breaker of system open or closed for every pod of the
// fleet that cfg names, until until (at most 24 hours from now), or
// releases it (state ""; until is ignored), without a registry: what
// `outbound breaker SYSTEM open|closed|auto` runs without --pod. The pods
// apply it within one message's delivery, or their next read of the
// state (Config.ReadInterval); a pod that starts before it ends reads it
// too. It returns an error naming the system when the arguments are
// wrong or Redis does not take it before ctx ends; the Redis URL's
// password never appears in it.
func Force(ctx context.Context, cfg Config, system string, state observe.BreakerState, until time.Time) error {
	ms, err := forceMillis(state, until, time.Now())
	if err == nil {
		err = config.CheckName(system)
	}
	if err != nil {
		return fmt.Errorf("fleet: system %q: %w", system, err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = forceTimeout // a command, maybe over a wide network
	}
	rdb, err := newClient(&cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := (forceTarget{keyBase(cfg.Namespace, system), channelOf(cfg.Namespace), system}).write(ctx, rdb, state, ms); err != nil {
		shown := (&Fleet{cfg: cfg, url: redactedURL(cfg)}).clean(err)
		return fmt.Errorf("fleet: system %q: forcing the breaker: %w", system, redisError{msg: shown, err: err})
	}
	return nil
}

// redisError is an error from Redis as the fleet shows it: its message
// without the URL's password, unwrapping to the error itself.
type redisError struct {
	msg string
	err error
}

func (e redisError) Error() string { return e.msg }
func (e redisError) Unwrap() error { return e.err }
