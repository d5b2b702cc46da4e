package fleet

import (
	"time"
)

// This file reads what comes from Redis (the scripts' replies) and from
// the channel as input, checked like an environment variable: another
// client may write anything under the namespace. A version is an integer
// in [0, maxVersion]; s is 0 or 1; an open time is cut to the system's
// BREAKER_OPEN_TIMEOUT from now; anything else is ignored and counted in
// Sync.Malformed, never applied. The scripts apply the same rules to what
// they read in Redis (lua/breaker.lua), so that a pod never writes back a
// state it would not accept itself.

// state is one system's state as read from Redis or the channel.
type state struct {
	ver  int64
	open bool
	left time.Duration // open: time to the half-open, in [0, openTimeout]
}

// readState checks a version, an s and the ms left open as read; it
// reports false, counted, when no pod could have written them. An open
// time past the system's open timeout is cut to it, counted, and the
// state is read from Redis at once: the scripts cut it there too, from
// the time they read it, and the sooner the closer to this pod's view.
func (c *circuit) readState(ver, s, ms int64) (state, bool) {
	if ver < 0 || ver > maxVersion || s < 0 || s > 1 || (s == 0 && ms != 0) {
		c.f.malformed.Add(1)
		return state{}, false
	}
	st := state{ver: ver, open: s == 1}
	if !st.open {
		return st, true
	}
	switch limit := c.openTimeout.Milliseconds(); {
	case ms <= 0: // half-open already
	case ms > limit:
		c.f.capped.Add(1)
		c.f.readSoon.Store(true)
		c.f.wake()
		st.left = c.openTimeout
	default:
		st.left = time.Duration(ms) * time.Millisecond
	}
	return st, true
}

// readReply checks the reply r of a breaker's op that has own values
// after the state's: the state, and those values. What the op found
// malformed or cut in Redis is added to the counts.
func (c *circuit) readReply(r []int64, own int) (state, []int64, bool) {
	b, ok := readBreakerReply(r, own)
	if !ok || b.malformed < 0 || b.capped < 0 {
		c.f.malformed.Add(1)
		return state{}, nil, false
	}
	c.f.malformed.Add(uint64(b.malformed))
	c.f.capped.Add(uint64(b.capped))
	st, ok := c.readState(b.ver, b.s, b.leftMs)
	return st, b.own, ok
}

// onMessage applies a message of the channel (message.go). A message
// for a system this pod does not have is not its business; a malformed
// one is counted.
func (f *Fleet) onMessage(payload string) {
	m, err := parseMessage(payload)
	if err != nil {
		f.malformed.Add(1)
		return
	}
	switch m.kind {
	case helloMessage:
	case pauseMessage:
		f.mu.Lock()
		q := f.quotas[m.system]
		f.mu.Unlock()
		if q != nil {
			q.readPause(m.ms, time.Now())
		}
	case forceMessage:
		f.onForce(m)
	case stateMessage:
		f.mu.Lock()
		c := f.circuits[m.system]
		f.mu.Unlock()
		if c == nil {
			return
		}
		if st, ok := c.readState(m.ver, m.s, m.ms); ok {
			c.apply(st, time.Now())
			c.show()
		}
	}
}

// readWindow checks the fleet window's totals of a sync reply: counts in
// [0, maxVersion], no more failures than requests.
func (c *circuit) readWindow(w syncReply) (reqs, fails uint64, ok bool) {
	if w.requests < 0 || w.requests > maxVersion || w.failures < 0 || w.failures > w.requests {
		c.f.malformed.Add(1)
		return 0, 0, false
	}
	return uint64(w.requests), uint64(w.failures), true
}
