package fleet

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// grantsOn runs the quota's op on srv for pods of a quota of limit (in
// micro-requests per second, as the pods write it).
type grantsOn struct {
	t      testing.TB
	rdb    *redis.Client
	limit  int64
	period int64 // ms: how old the fleet's totals may be (0: every tick counts every entry)
	life   int64 // ms: a grant's life (0: 1100, the life at the tick of up to 50 pods)
}

func newGrants(t *testing.T, limit int64) grantsOn {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: syncWait, ReadTimeout: syncWait, WriteTimeout: syncWait})
	t.Cleanup(func() { rdb.Close() })
	return grantsOn{t: t, rdb: rdb, limit: limit}
}

// ask is one pod's tick: it wants want and may still send at ack; it
// returns the grant and the live pods.
func (g grantsOn) ask(pod string, want, ack int64) (grant, pods int64) {
	g.t.Helper()
	life := time.Duration(cmp.Or(g.life, 1100)) * time.Millisecond
	call := quotaCall{holder: pod, limit: g.limit, demand: want, ack: ack, most: g.limit, life: life,
		longestPause: 5 * time.Second, lostCap: g.limit, period: time.Duration(g.period) * time.Millisecond,
		longestLife: life, mostFields: 1 << 20}
	r, err := runAlone(g.rdb, call)
	if err != nil || len(r) != 6 {
		g.t.Fatalf("quota op: %v %v", r, err)
	}
	return r[0], r[1]
}

// TestGrantNeverTakesWhatAnotherPodMayStillSend: pod a sends at the
// whole limit; when b wants most of it, a's grant is cut, but b gets
// only what a no longer holds: a may still send at its old rate until
// it says (on its next tick) that it applied the cut.
func TestGrantNeverTakesWhatAnotherPodMayStillSend(t *testing.T) {
	t.Parallel()
	g := newGrants(t, 100)
	g.life = time.Hour.Milliseconds() // no entry ends between two asks, however late they run
	if got, _ := g.ask("a", 100, 0); got != 100 {
		t.Fatalf("a alone, wanting all: granted %d, want 100", got)
	}
	if got, _ := g.ask("a", 100, 100); got != 100 {
		t.Fatalf("a again: granted %d", got)
	}
	if got, _ := g.ask("b", 100, 0); got != 0 {
		t.Errorf("b while a sends at 100: granted %d, want 0", got)
	}
	// a's tick: cut to its fair half; it still sends at 100 until the
	// reply, and says so: it holds 100.
	if got, _ := g.ask("a", 100, 100); got != 50 {
		t.Errorf("a, b wanting as much: granted %d, want 50", got)
	}
	if got, _ := g.ask("b", 100, 0); got != 0 {
		t.Errorf("b before a applied its cut: granted %d, want 0", got)
	}
	if got, _ := g.ask("a", 100, 50); got != 50 {
		t.Errorf("a, having applied its cut: granted %d, want 50", got)
	}
	if got, _ := g.ask("b", 100, 0); got != 50 {
		t.Errorf("b once a applied its cut: granted %d, want 50", got)
	}
}

// TestGrantsAreMaxMinFair: wants of 10, 50 and 500 of a limit of 200
// settle at 10, 50 and 140; wants of 10 and 10 of 100 at 50 each (what
// nobody wants is split evenly).
func TestGrantsAreMaxMinFair(t *testing.T) {
	t.Parallel()
	g := newGrants(t, 200)
	g.life = time.Hour.Milliseconds() // no entry ends between two asks, however late they run
	wants := map[string]int64{"a": 10, "b": 50, "c": 500}
	got := map[string]int64{}
	for range 4 { // each pod's tick, a few times: the holds settle
		for _, p := range []string{"a", "b", "c"} {
			got[p], _ = g.ask(p, wants[p], got[p])
		}
	}
	if got["a"] != 10 || got["b"] != 50 || got["c"] != 140 {
		t.Errorf("grants %v, want a 10, b 50, c 140", got)
	}
	g = newGrants(t, 100)
	g.life = time.Hour.Milliseconds()
	var a, b int64
	for range 3 {
		a, _ = g.ask("a", 10, a)
		b, _ = g.ask("b", 10, b)
	}
	if a != 50 || b != 50 {
		t.Errorf("grants a %d, b %d; want 50 each", a, b)
	}
}

// TestQuotaTotalsFollowTheEntries: a pod's tick reads the fleet's
// totals rather than every entry, and moves them by its own change. Over
// a long mixed run of ticks, some reading the totals and some counting
// every entry again, the totals' hold is always the sum of the entries'
// holds, and the holds never sum above the limit: a pod is never granted
// what another may still send at. The grants live for an hour, so that
// none expires during the run however slow the machine.
func TestQuotaTotalsFollowTheEntries(t *testing.T) {
	t.Parallel()
	g := newGrants(t, 1000)
	g.life = 3_600_000
	rng := rand.New(rand.NewPCG(1, 2))
	pods := []string{"a", "b", "c", "d", "e"}
	granted := map[string]int64{}
	for step := range 400 {
		g.period = 60_000 // the totals are fresh: the pod reads them alone
		if step%7 == 0 {
			g.period = 0 // count every entry again
		}
		p := pods[rng.IntN(len(pods))]
		want := rng.Int64N(g.limit + 1)
		if rng.IntN(4) == 0 {
			want = 0
		}
		granted[p], _ = g.ask(p, want, granted[p])
		entries, totals := g.hash()
		var sum int64
		for _, e := range entries {
			sum += max(e[1], e[2])
		}
		if totals != sum {
			t.Fatalf("step %d: the totals hold %d, the entries %d", step, totals, sum)
		}
		if sum > g.limit {
			t.Fatalf("step %d: the pods hold %d of a limit of %d: %v", step, sum, g.limit, entries)
		}
	}
}

// hash reads the quota's hash: each pod's entry (d g a e, without its
// limit l), and the hold of the fleet's totals.
func (g grantsOn) hash() (map[string][4]int64, int64) {
	g.t.Helper()
	all, err := g.rdb.HGetAll(context.Background(), ":quota").Result()
	if err != nil {
		g.t.Fatal(err)
	}
	entries := map[string][4]int64{}
	var held int64
	for k, v := range all {
		f := strings.Fields(v)
		n := make([]int64, len(f))
		for i, x := range f {
			n[i], _ = strconv.ParseInt(x, 10, 64)
		}
		switch {
		case k == "#" && len(n) == 6:
			held = n[1]
		case k != "#" && len(n) == 5:
			entries[k] = [4]int64(n[:4])
		default:
			g.t.Fatalf("%s: %q in the quota's hash", k, v)
		}
	}
	return entries, held
}

// BenchmarkQuotaRecount measures the Redis CPU of one quota op that
// counts every entry of a fleet of 1,000 pods again (once per tick of
// the fleet, by the first pod to ask), when the pods want less than the
// limit and when they want more (the fair level is then sought over
// their sorted wants), and of one that reads the totals alone (every
// other pod's), each call its own batch: the figures of
// docs/fleet-redis.md, with BenchmarkRedisCost.
func BenchmarkQuotaRecount(b *testing.B) {
	for _, bc := range []struct {
		name          string
		limit, period int64
	}{
		{"counting1000entries", 1e12, 0},
		{"counting1000entriesOverTheLimit", 5e8, 0},
		{"readingTheTotals", 1e12, 3_600_000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := redistest.Start(b)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: syncWait, ReadTimeout: syncWait, WriteTimeout: syncWait})
			b.Cleanup(func() { rdb.Close() })
			g := grantsOn{t: b, rdb: rdb, limit: bc.limit, period: bc.period}
			end := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
			fields := []any{}
			for i := range 999 {
				// entries as pods write them: wants of 1 to 2 requests a
				// second, holds of a thousandth, the pod's limit
				want := 1_000_000 + (i*7919)%1000*1000
				fields = append(fields, fmt.Sprintf("pod%04d", i), fmt.Sprintf("%d 1000 1000 %s %d", want, end, bc.limit))
			}
			if err := rdb.HSet(context.Background(), ":quota", fields...).Err(); err != nil {
				b.Fatal(err)
			}
			g.ask("me", 1e6, 0) // the first counts, and writes the totals
			before, _ := srv.CPU()
			b.ResetTimer()
			for range b.N {
				g.ask("me", 1e6, 1e6)
			}
			b.StopTimer()
			after, _ := srv.CPU()
			b.ReportMetric(float64((after-before).Microseconds())/float64(b.N), "redis-cpu-us/op")
		})
	}
}

// TestTheRestLiftsNoPodAboveAnEvenSplit: wants of 10 and 30 of a limit
// of 100, which leave 60: a is lifted to 40, b to an even split (50),
// not to 60; wants of 10 and 60: b, above an even split, gets its want
// (60) and not more, a its want and half the rest (25).
func TestTheRestLiftsNoPodAboveAnEvenSplit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b, wantA, wantB int64 }{
		{10, 30, 40, 50},
		{10, 60, 25, 60},
	} {
		g := newGrants(t, 100)
		g.life = time.Hour.Milliseconds() // no entry ends between two asks, however late they run
		var a, b int64
		for range 4 { // the holds settle
			a, _ = g.ask("a", c.a, a)
			b, _ = g.ask("b", c.b, b)
		}
		if a != c.wantA || b != c.wantB {
			t.Errorf("wants a %d, b %d of 100: granted a %d, b %d; want a %d, b %d", c.a, c.b, a, b, c.wantA, c.wantB)
		}
	}
}
