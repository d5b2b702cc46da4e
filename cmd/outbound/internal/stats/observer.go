package stats

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// Collector is the demo's observer of a registry: it feeds the calls,
// attempts and breaker transitions of each system into that system's
// [System], and keeps the transitions for the live view. Its methods are
// quick and never call back into a client, as observe.Observer requires.
type Collector struct {
	start   time.Time
	systems map[string]*System // fixed at construction: read without a lock
	events  events
	frozen  atomic.Bool // set by Freeze: calls and attempts are no longer counted
}

// NewCollector returns a collector for the named systems, timing events
// from start.
func NewCollector(start time.Time, names []string) *Collector {
	c := &Collector{start: start, systems: make(map[string]*System, len(names))}
	for _, n := range names {
		c.systems[n] = &System{}
	}
	return c
}

// System returns the stats of the named system, or nil for a system not
// given to NewCollector.
func (c *Collector) System(name string) *System { return c.systems[name] }

// Freeze stops counting calls and attempts: those that end after it were
// cut short by the end of the demo, and would count its own stop as the
// upstreams' doing. Breaker transitions are still logged.
func (c *Collector) Freeze() { c.frozen.Store(true) }

// ObserveCall counts a call by its outcome.
func (c *Collector) ObserveCall(ev observe.CallEvent) {
	if s := c.systems[ev.System]; s != nil && !c.frozen.Load() {
		s.call(ev)
	}
}

// ObserveAttempt counts an attempt that reached the upstream; one the
// registry refused sent nothing and is not counted.
func (c *Collector) ObserveAttempt(ev observe.AttemptEvent) {
	if s := c.systems[ev.System]; s != nil && !ev.Outcome.Refused() && !c.frozen.Load() {
		s.attempt(ev)
	}
}

// ObserveBreaker counts transitions to open and logs every transition.
func (c *Collector) ObserveBreaker(system string, from, to observe.BreakerState) {
	at := time.Since(c.start)
	if s := c.systems[system]; s != nil && to == observe.BreakerOpen {
		s.breakerOpened(at)
	}
	c.events.add(Event{At: at, What: fmt.Sprintf("%-9s breaker %s -> %s", system, from, to)})
}

// Events returns the breaker transitions from index i on, oldest first.
func (c *Collector) Events(i int) []Event { return c.events.since(i) }

// Event is one breaker transition, At after the demo's start.
type Event struct {
	At   time.Duration
	What string
}

// maxEvents bounds the log: a flapping breaker cannot eat the memory.
const maxEvents = 10000

// events is the log of breaker transitions. Safe for concurrent use.
type events struct {
	mu   sync.Mutex
	list []Event
}

func (l *events) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.list) < maxEvents {
		l.list = append(l.list, e)
	}
}

func (l *events) since(i int) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.list) {
		return nil
	}
	return append([]Event(nil), l.list[i:]...)
}

var _ observe.Observer = (*Collector)(nil)
