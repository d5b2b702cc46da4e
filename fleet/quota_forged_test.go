package fleet_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// forgeTotals is another client's script that rewrites the fleet's totals
// of a quota (the field "#" of KEYS[1]) with Redis's own clock, so that
// they read as fresh: one pod, every pod gets its demand and the whole
// limit (ARGV[1], micro-requests per second) on top, and the pods hold
// what the largest entry holds (ARGV[2] "max": each pod finds that the
// other holds nothing when they hold alike) or the smallest (ARGV[2]
// "min": the pod holding least finds that nobody else holds anything).
var forgeTotals = redis.NewScript(`
local all = redis.call('HGETALL', KEYS[1])
local held
for i = 1, #all, 2 do
  if all[i] ~= '#' then
    local g, a = string.match(all[i + 1], '^%d+ (%d+) (%d+) %d+$')
    if g then
      local h = math.max(tonumber(g), tonumber(a))
      if not held or (ARGV[2] == 'max' and h > held) or (ARGV[2] == 'min' and h < held) then held = h end
    end
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], '#', string.format('%d %d 1 0 %d', now, held or 0, ARGV[1]))
return 1
`)

// TestForgedQuotaTotalsCostNoOvershoot: two pods share 100/s while
// another client rewrites the fleet's totals every 5 ms for 3 s, with
// Redis's clock, so that a pod would find that the other holds nothing:
// both pods busy throughout, or one busy and the other joining the load
// in the middle of the forgery. The totals alone never grant a pod more
// than an even split (limit / pods), and a pod holding more counts every
// entry on every tick: the pods send at most limit + burst in any second
// (quotaRun.check's bound, 110) plus what a pod below an even split may
// take from forged totals before the next count takes it back, one tick
// and a round trip of its even split (50/s x 300 ms = 15), during the
// forgery and after it. The forgery is counted in Sync.Malformed.
func TestForgedQuotaTotalsCostNoOvershoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, forge string
		late        time.Duration // when the second pod's load begins
	}{
		{"both pods busy", "max", 0},
		{"a pod joins the load", "min", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forgedRun(t, tc.forge, tc.late)
		})
	}
}

// forgedRun is one run of TestForgedQuotaTotalsCostNoOvershoot: the
// forgery from 1s for 3s (longer on a starved machine, until it wrote
// 50 times), the second pod busy from late, 2s more after the forgery.
func forgedRun(t *testing.T, forge string, late time.Duration) {
	srv := redistest.Start(t)
	up := newArrivals(t, nil)
	sends := &sendTimes{}
	pods := startPods(t, 2, srv, "forged", "local", up.URL, quotaEnv("100/s", nil), sends.option())
	settle(t, pods, 100)
	malformed := func() (n uint64) {
		for _, p := range pods {
			n += p.fleet.Sync().Malformed
		}
		return n
	}
	r0 := malformed()

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: syncWait, ReadTimeout: syncWait, WriteTimeout: syncWait})
	t.Cleanup(func() { rdb.Close() })
	quota := newForeign(srv, "forged").base + ":quota"
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var served atomic.Int64
	start := time.Now()
	drive(ctx, &wg, pods[0], 8, 0, &served)
	wg.Go(func() {
		sleepCtx(ctx, late)
		drive(ctx, &wg, pods[1], 8, 0, &served)
	})
	// The forger writes for 3s, and on until it has written 50 times (a
	// starved machine runs it slowly: 1.5 writes a second was seen), at
	// most forgeFor; the run goes on 2s after.
	const forgeFor = 2 * syncWait
	var forged atomic.Int64
	forging := make(chan struct{})
	wg.Go(func() {
		defer close(forging)
		sleepCtx(ctx, time.Second)
		from := time.Now()
		forgeCtx, stop := context.WithTimeout(ctx, forgeFor)
		defer stop()
		for forgeCtx.Err() == nil && (time.Since(from) < 3*time.Second || forged.Load() < 50) {
			if forgeTotals.Run(forgeCtx, rdb, []string{quota}, 100_000_000, forge).Err() == nil {
				forged.Add(1)
			}
			sleepCtx(forgeCtx, 5*time.Millisecond)
		}
	})
	<-forging
	time.Sleep(2 * time.Second)
	end := time.Now()
	cancel()
	wg.Wait()

	const limit, burst, tolerance = 100, 5, 15
	most := sliding(sends.since(start), time.Second)
	ws := windows(up.since(start), start, end, time.Second)
	t.Logf("%d forged totals in %.1fs; upstream's 1s windows %v; most sent by the pods in any sliding 1s: %d; Sync.Malformed +%d",
		forged.Load(), end.Sub(start).Seconds()-3, ws, most, malformed()-r0)
	if forged.Load() < 50 {
		t.Fatalf("the forger wrote %d times in %v, want at least 50", forged.Load(), forgeFor)
	}
	if most > limit+burst+5+tolerance {
		t.Errorf("the pods sent %d requests within one second under forged totals, want at most %d (limit + burst + 5, + %d: a tick and a round trip of an even split)",
			most, limit+burst+5+tolerance, tolerance)
	}
	if got := malformed() - r0; got == 0 {
		t.Errorf("the forged totals were not counted in Sync.Malformed")
	}
}
