package fleet

import (
	"log/slog"
	"time"
)

// This file keeps the fleet's sync state: in sync (the breakers at scope
// fleet share evidence and state) or degraded (each decides alone), and
// tells its logger (Config.Logger, or the registry's) of its changes: one record when the fleet loses
// sync (degraded, with the cause), one when it is back, and a reminder
// every remindEvery while it stays degraded, however many round trips
// fail in between.

// msgDegraded is the record of a fleet that lost sync.
const msgDegraded = "fleet: out of sync with Redis; breakers at scope fleet decide alone"

// remindEvery is how often a degraded fleet says so again in the log.
const remindEvery = time.Minute

// fail marks the fleet degraded: every breaker decides alone.
func (f *Fleet) fail(err error) {
	f.mu.Lock()
	now := time.Now()
	if f.synced.Load() || f.lastErr == "" {
		f.since = now
	}
	f.synced.Store(false)
	f.lastErr = f.clean(err)
	log := f.log.Load()
	tell := !f.toldDegraded && !f.closed && log != nil
	if tell {
		f.toldDegraded, f.toldAt = true, now
	}
	cause := f.lastErr
	f.mu.Unlock()
	if tell {
		log.Warn(msgDegraded,
			slog.String("redis", f.url), slog.String("error", cause))
	}
}

// useLogger makes l, the logger of the registry the fleet serves, the
// fleet's, unless it has one (Config.Logger, or a registry's before).
// A fleet already out of sync says so to l at once: Redis may have been
// down before the registry was built.
func (f *Fleet) useLogger(l *slog.Logger) {
	if l == nil || !f.log.CompareAndSwap(nil, l) {
		return
	}
	f.mu.Lock()
	tell := !f.synced.Load() && f.lastErr != "" && !f.toldDegraded && !f.closed
	if tell {
		f.toldDegraded, f.toldAt = true, time.Now()
	}
	cause := f.lastErr
	f.mu.Unlock()
	if tell {
		l.Warn(msgDegraded,
			slog.String("redis", f.url), slog.String("error", cause))
	}
}

// note records err, a failure that does not degrade the fleet (yet).
func (f *Fleet) note(err error) {
	f.mu.Lock()
	f.lastErr = f.clean(err)
	f.mu.Unlock()
}

// ok marks the fleet in sync, once the listener receives the channel too.
func (f *Fleet) ok() {
	if f.synced.Load() || !f.subscribed.Load() {
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	now := time.Now()
	degraded := now.Sub(f.since)
	f.since = now
	f.synced.Store(true)
	tell := f.toldDegraded
	f.toldDegraded = false
	f.mu.Unlock()
	if log := f.log.Load(); tell && log != nil {
		log.Info("fleet: in sync with Redis again", slog.String("redis", f.url),
			slog.Duration("degraded_for", degraded))
	}
}

// remind logs the degraded state again once every remindEvery.
func (f *Fleet) remind() {
	log := f.log.Load()
	if log == nil || f.synced.Load() {
		return
	}
	f.mu.Lock()
	now := time.Now()
	tell := f.toldDegraded && !f.closed && now.Sub(f.toldAt) >= f.cfg.remindEvery
	if tell {
		f.toldAt = now
	}
	since, cause := f.since, f.lastErr
	f.mu.Unlock()
	if tell {
		log.Warn("fleet: still out of sync with Redis; breakers at scope fleet decide alone",
			slog.String("redis", f.url), slog.String("error", cause), slog.Time("since", since))
	}
}

// Sync is the fleet's sync state, for the status page and metrics.
type Sync struct {
	// Synced is true while Redis answers: the breakers at scope fleet
	// share evidence and state. False: each decides alone (local).
	Synced bool `json:"synced"`
	// Since is when the current state began (degraded since ...).
	Since time.Time `json:"since"`
	// LastError is the last Redis error, password redacted; it is kept
	// after sync resumes.
	LastError string `json:"last_error,omitempty"`
	// Redis is the URL, password redacted.
	Redis string `json:"redis"`
	// Malformed counts the values read from Redis or the fleet's channel
	// that no pod could have written, ignored: a version outside [0, 2^53),
	// a field that is not a number, a key of the wrong type, garbage in a
	// window, a reply or a message of the wrong shape, a quota's totals
	// that hold less than its entries. Another client writes under the
	// namespace.
	Malformed uint64 `json:"malformed,omitempty"`
	// Capped counts the open times read past now + the system's
	// BREAKER_OPEN_TIMEOUT, cut to it.
	Capped uint64 `json:"capped,omitempty"`
}

// Sync returns the fleet's sync state.
func (f *Fleet) Sync() Sync {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Sync{Synced: f.synced.Load(), Since: f.since, LastError: f.lastErr, Redis: f.url,
		Malformed: f.malformed.Load(), Capped: f.capped.Load()}
}
