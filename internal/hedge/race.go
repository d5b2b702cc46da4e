package hedge

import (
	"context"
	"time"
)

// Copy is what a race needs to know of one copy of an attempt, once it
// has ended.
type Copy interface {
	// Final reports whether the caller should see the copy as it is: an
	// answer that is not temporary, or an error no other copy can cure.
	Final() bool
	// Refused reports whether the copy was refused with no I/O (by the
	// breaker or the rate limit).
	Refused() bool
	// Answered reports whether the copy got response headers, and how
	// long it took: the percentile delay learns from those.
	Answered() (bool, time.Duration)
}

// How says how a copy that is not the attempt's end took part in a
// race.
type How uint8

// The ways a copy that is not the attempt's end takes part.
const (
	Failed How = iota // it failed, and another copy's end is the attempt's
	Lost              // it was cancelled: another copy won
)

// Racer is the hedge stage's side of a race: it sends and pays for the
// copies, and hears how each took part.
type Racer[C Copy] interface {
	// Send sends copy k (0 the first) under ctx, which the race cancels
	// when another copy wins. It runs on a goroutine of its own.
	Send(ctx context.Context, k int) C
	// Hedge pays for one more copy (a permit, a token, a closed breaker)
	// and prepares it; false: none may go now.
	Hedge() bool
	// Took tells how copy k, c, took part, once the race knows; it is
	// not the attempt's end, so its response is the racer's to close.
	Took(c C, k int, how How)
}

// Race sends the copies of one attempt: the first at once and, each
// delay of p without an answer the caller should see, one more (Max at
// most) while the racer pays for it. The first final copy wins; the
// others are cancelled and waited for. When every copy fails, the last
// failure is the attempt's end (final is false). It returns that end and
// its copy's number once every copy has ended; the racer has heard of
// every other copy.
func Race[C Copy](ctx context.Context, p *Policy, r Racer[C]) (end C, k int, final bool) {
	rc := race[C]{r: r, results: make(chan result[C], 1+p.Max())}
	rc.launch(ctx, 0)
	timer := time.NewTimer(p.Delay())
	defer timer.Stop()
	sent := 0
	var last *result[C] // the last failure, while copies are in flight
	for rc.pending > 0 {
		select {
		case <-timer.C:
			if sent < p.Max() && r.Hedge() {
				sent++
				rc.launch(ctx, sent)
				timer.Reset(p.Delay())
			}
		case res := <-rc.results:
			rc.pending--
			p.Record(res.c.Answered())
			if res.c.Final() {
				rc.settle(res, last)
				return res.c, res.k, true
			}
			if res.c.Refused() && res.k > 0 {
				r.Took(res.c, res.k, Failed) // a hedge refused: no I/O, not the answer
				continue
			}
			if last != nil {
				r.Took(last.c, last.k, Failed)
			}
			last = &res
		}
	}
	return last.c, last.k, false
}

type result[C Copy] struct {
	c C
	k int
}

// race is the state of one Race.
type race[C Copy] struct {
	r       Racer[C]
	results chan result[C]
	cancels []context.CancelFunc // of each copy, by copy number
	pending int                  // copies in flight
}

func (rc *race[C]) launch(parent context.Context, k int) {
	ctx, cancel := context.WithCancel(parent)
	rc.cancels = append(rc.cancels, cancel)
	rc.pending++
	go func() { rc.results <- result[C]{rc.r.Send(ctx, k), k} }()
}

// settle ends the race on w: the other copies are cancelled and waited
// for, and the racer hears of each, the earlier failure first.
func (rc *race[C]) settle(w result[C], last *result[C]) {
	for k, cancel := range rc.cancels {
		if k != w.k {
			cancel()
		}
	}
	if last != nil {
		rc.r.Took(last.c, last.k, Failed)
	}
	for ; rc.pending > 0; rc.pending-- {
		res := <-rc.results
		rc.r.Took(res.c, res.k, Lost)
	}
}
