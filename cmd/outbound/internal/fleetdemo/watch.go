package fleetdemo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// watcher watches the pods' breakers: when the first pod opens, when the
// others follow, and how many calls of the storm reached the fake before
// the whole fleet was open.
type watcher struct {
	out  io.Writer
	pods pods
	up   *upstream

	opened     []bool        // per pod: open, until it closes again
	firstOpen  time.Time     // when the first pod of this round opened; zero: none yet
	lagMax     time.Duration // the latest pod's lag behind the first
	hitsAtCalm int64         // the fake's hits when it last was healthy
	trips      int           // rounds in which every pod opened
}

// watch checks the breakers every millisecond and reports every second,
// until ctx ends.
func (w *watcher) watch(ctx context.Context) {
	w.opened = make([]bool, len(w.pods))
	w.hitsAtCalm = w.up.hits.Load()
	check := time.NewTicker(time.Millisecond)
	defer check.Stop()
	report := time.NewTicker(time.Second)
	defer report.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			w.check()
		case <-report.C:
			w.report()
		}
	}
}

// check updates which pods are open, and logs the round once every pod
// is.
func (w *watcher) check() {
	if w.update() && !w.firstOpen.IsZero() {
		w.trip()
	}
	if !w.up.failing() {
		w.hitsAtCalm = w.up.hits.Load()
	}
}

// update notes each pod that opened (and the lag behind the first) or
// closed again, and reports whether every pod is open.
func (w *watcher) update() (allOpen bool) {
	allOpen = true
	for i, p := range w.pods {
		state := p.client.Status().Breaker
		switch {
		case state == observe.BreakerOpen && !w.opened[i]:
			w.opened[i] = true
			if w.firstOpen.IsZero() {
				w.firstOpen = time.Now()
			}
			w.lagMax = max(w.lagMax, time.Since(w.firstOpen))
		case state == observe.BreakerClosed && w.opened[i]:
			w.opened[i] = false
		}
		allOpen = allOpen && w.opened[i]
	}
	return allOpen
}

// trip logs a round in which every pod opened, and starts the next.
func (w *watcher) trip() {
	lag := "under 1ms" // the watcher's tick
	if w.lagMax >= time.Millisecond {
		lag = w.lagMax.Round(time.Millisecond).String()
	}
	w.trips++
	fmt.Fprintf(w.out, "  >> t=%4.1fs every pod open within %s of the first, after %d calls of the storm reached the fake\n",
		time.Since(w.up.start).Seconds(), lag, w.up.hits.Load()-w.hitsAtCalm)
	w.firstOpen, w.lagMax = time.Time{}, 0
}

// report writes one line: the fake's state, and each pod's breaker,
// sync, paid and refused calls.
func (w *watcher) report() {
	var b strings.Builder
	state := "healthy"
	if w.up.failing() {
		state = "503s"
	}
	fmt.Fprintf(&b, "t=%4.1fs fake %-7s", time.Since(w.up.start).Seconds(), state)
	for i, p := range w.pods {
		st := p.client.Status()
		sync := "synced"
		if st.Fleet != nil && !st.Fleet.Synced {
			sync = "local"
		}
		fmt.Fprintf(&b, " | pod-%d %-9s %s %4d paid %4d refused", i+1, st.Breaker, sync, p.paid.Load(), st.BreakerRefused)
	}
	fmt.Fprintln(w.out, b.String())
}
