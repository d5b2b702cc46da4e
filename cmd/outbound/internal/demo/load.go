package demo

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/cmd/outbound/internal/fakes"
	"github.com/outbound-go/outbound/cmd/outbound/internal/view"
	"github.com/outbound-go/outbound/registry"
)

const (
	// callBound bounds every call of a worker, as a request handler's
	// deadline would; the registry caps each call by it.
	callBound = 3 * time.Second
	// thinkMin and thinkMax bound the pause between a worker's calls, so
	// the load stays modest on a laptop.
	thinkMin = 10 * time.Millisecond
	thinkMax = 40 * time.Millisecond
	// lastFrameAfter is how stale the last frame may be at the end before
	// a final one is drawn.
	lastFrameAfter = 250 * time.Millisecond
	// liveEvents is how many breaker transitions the redrawn view shows.
	liveEvents = 8
)

// callFunc is one call of worker number worker, its n-th.
type callFunc func(ctx context.Context, worker int, n uint64) error

// callsOf returns the call each worker makes, by system, through the
// sample adapters and adapters.GetJSON.
func callsOf(reg *registry.Registry) map[string]callFunc {
	inv := inventory.New(reg.MustClient(fakes.Inventory))
	pay := payments.New(reg.MustClient(fakes.Payments))
	catalog, shipping := reg.MustClient(fakes.Catalog), reg.MustClient(fakes.Shipping)
	return map[string]callFunc{
		fakes.Inventory: func(ctx context.Context, _ int, _ uint64) error {
			_, err := inv.Stock(ctx, randomISBN())
			return err
		},
		fakes.Catalog: func(ctx context.Context, _ int, _ uint64) error {
			var book struct{ Title string }
			return adapters.GetJSON(ctx, catalog, []string{"books", randomISBN()}, &book)
		},
		fakes.Payments: func(ctx context.Context, worker int, n uint64) error {
			_, err := pay.Register(ctx, fmt.Sprintf("w%d-%d", worker, n), 500+rand.Int64N(9500))
			return err
		},
		fakes.Shipping: func(ctx context.Context, _ int, _ uint64) error {
			var quote struct{ Cents int64 }
			return adapters.GetJSON(ctx, shipping, []string{"quotes", randomISBN()}, &quote)
		},
	}
}

func randomISBN() string { return fmt.Sprintf("978%010d", rand.N(10_000_000_000)) }

// drive runs the workers until the demo's duration passes or ctx ends,
// drawing on scr every second, and reports whether ctx ended it early.
// Every worker has returned when it returns.
func (sc *scenario) drive(ctx context.Context, scr *screen) (stopped bool) {
	// The workers' context has no deadline of its own: a deadline would
	// shrink the budget of the last calls and make them fail with a
	// spent budget that has nothing to do with the upstreams.
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var wg sync.WaitGroup
	for i := range sc.opts.workers {
		wg.Go(func() { sc.work(workCtx, i) })
	}
	end := time.NewTimer(sc.opts.duration)
	defer end.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-end.C:
			running = false
		case <-tick.C:
			scr.draw(sc, false)
		}
	}
	sc.stats.Freeze() // what ends from now on, the demo's own stop ended
	stopWork()
	wg.Wait()
	if time.Since(scr.drawn) > lastFrameAfter {
		scr.draw(sc, true)
	}
	return ctx.Err() != nil
}

// work calls worker i's system in a loop, each call bounded by
// callBound, with a short pause between calls, until ctx ends.
func (sc *scenario) work(ctx context.Context, i int) {
	names := fakes.Names()
	name := names[i%len(names)]
	call, st := sc.calls[name], sc.stats.System(name)
	think := time.NewTimer(0)
	defer think.Stop()
	for n := uint64(1); ; n++ {
		cctx, cancel := context.WithTimeout(ctx, callBound)
		t0 := time.Now()
		err := call(cctx, i, n)
		took := time.Since(t0)
		cancel()
		if ctx.Err() != nil {
			return // cut short by the end of the demo: its latency says nothing
		}
		st.RecordLatency(took, err)
		think.Reset(thinkMin + rand.N(thinkMax-thinkMin))
		select {
		case <-ctx.Done():
			return
		case <-think.C:
		}
	}
}

// screen is where the live view goes: redrawn in place with ansi,
// appended otherwise.
type screen struct {
	w     io.Writer
	head  string // what the demo runs, repeated atop each redrawn frame
	ansi  bool
	shown int       // breaker transitions appended so far
	drawn time.Time // when the last frame was drawn
}

// draw draws one frame: the live table and the breaker transitions (the
// latest few when redrawing, the new ones when appending).
func (scr *screen) draw(sc *scenario, final bool) {
	scr.drawn = time.Now()
	var b strings.Builder
	if scr.ansi {
		b.WriteString(view.Home + view.Clear + scr.head + "\n")
	} else {
		b.WriteString("\n")
	}
	view.LiveTable(&b, sc.snapshots(!final), time.Since(sc.start), sc.opts.duration)
	if scr.ansi {
		if ev := sc.stats.Events(0); len(ev) > 0 {
			b.WriteString("\nbreaker transitions (latest last):\n")
			view.Events(&b, ev[max(0, len(ev)-liveEvents):])
		}
	} else {
		ev := sc.stats.Events(scr.shown)
		scr.shown += len(ev)
		view.Events(&b, ev)
	}
	_, _ = io.WriteString(scr.w, b.String())
}
