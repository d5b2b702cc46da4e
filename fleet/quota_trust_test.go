package fleet_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/outboundtest"
)

// The quota's keys are shared ground too: another client may write
// anything there, or Redis may lose them. These tests play that client.

// trustQuotaPods starts 2 idle pods sharing 100/s (each 50/s), and
// returns them with the namespace's keys and a reader of the sum of
// their Sync.Malformed and Sync.Capped.
func trustQuotaPods(t *testing.T, ns string) ([]*pod, foreign, func() (uint64, uint64)) {
	t.Helper()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	pods := startPods(t, 2, srv, ns, "local", up.URL, quotaEnv("100/s", nil))
	settle(t, pods, 100)
	counts := func() (malformed, capped uint64) {
		for _, p := range pods {
			s := p.fleet.Sync()
			malformed, capped = malformed+s.Malformed, capped+s.Capped
		}
		return malformed, capped
	}
	return pods, newForeign(srv, ns), counts
}

// TestQuotaForgedSharesAreRejectedOrCapped: another client writes into
// the quota's hash an entry that is not four numbers, a negative demand,
// and a pod that holds a million times the limit for an hour. The first
// two are deleted (Sync.Malformed); the last is cut to the limit and to
// the longest grant life of any pod (Sync.Capped; 8s plus the pods'
// Config.Timeout: a pod's life follows its tick, which follows the
// number of pods, and an honest pod of a large fleet holds that long),
// so the pods share the whole limit again within that life and a
// little.
func TestQuotaForgedSharesAreRejectedOrCapped(t *testing.T) {
	t.Parallel()
	pods, f, counts := trustQuotaPods(t, "qforged")
	quota := f.base + ":quota"
	r0, c0 := counts()
	far := strconv.FormatInt(ms(time.Now().Add(time.Hour)), 10)
	f.do(t, "HSET", quota, "garbage", "not numbers", "negative", "-5 0 0 "+far, "hog", "0 999999999999999 0 "+far)
	forged := time.Now()
	waitFor(t, syncWait, "the garbage malformed, the hog capped", func() bool {
		r, c := counts()
		return r >= r0+2 && c >= c0+1
	})
	// The cap counts from when a pod's sync cut the entry, which a slow
	// machine delays after the write, and which happened before the
	// count above showed it: the end is judged from then.
	capped := time.Now()
	if v := f.do(t, "HGET", quota, "garbage"); v != "" {
		t.Errorf("the garbage is still there: %q", v)
	}
	longest := 8*time.Second + podTimeout
	if e := hogEnd(t, f.do(t, "HGET", quota, "hog")); e > ms(capped.Add(longest+100*time.Millisecond)) {
		t.Errorf("the hog's entry ends %v after it was seen capped, want at most the longest grant life (%v)", time.Duration(e-ms(capped))*time.Millisecond, longest)
	}
	waitFor(t, longest+10*time.Second, "the pods share the limit again", func() bool {
		return sumShares(pods, func(s float64) bool { return s >= 49.99 }) == 100
	})
	t.Logf("a forged pod holding 10^6 x the limit for an hour: the pods had the limit back %v after it was written", time.Since(forged))
	if v := f.do(t, "HGET", quota, "hog"); v != "" {
		t.Errorf("the hog is still there: %q", v)
	}
}

// hogEnd is the end (Unix ms) of a quota entry "d g a e", as read.
func hogEnd(t *testing.T, v string) int64 {
	t.Helper()
	f := strings.Fields(v)
	if len(f) != 4 {
		return 0 // gone already
	}
	e, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		t.Fatalf("the hog's entry %q", v)
	}
	return e
}

// TestQuotaLostInRedisCostsNoOvershoot: the quota's hash is deleted, or
// replaced by a key of the wrong type (which the pods delete, counted),
// between two ticks, as when Redis restarts empty or fails over to a
// replica that missed the last writes. The first pod to see it would
// find itself alone and take the whole limit while the other still
// sends at its share: a pod that was sending and finds its entry gone
// takes at most limit / pods last seen for a grant life instead.
func TestQuotaLostInRedisCostsNoOvershoot(t *testing.T) {
	t.Parallel()
	pods, f, counts := trustQuotaPods(t, "qlost")
	quota := f.base + ":quota"
	for _, lose := range [][][]string{{{"DEL", quota}}, {{"EVAL", "redis.call('DEL', KEYS[1]) return redis.call('RPUSH', KEYS[1], ARGV[1])", "1", quota, "a list"}}} {
		r0, _ := counts()
		for _, cmd := range lose {
			f.do(t, cmd...)
		}
		end := time.Now().Add(time.Second)
		for time.Now().Before(end) {
			for i, p := range pods {
				if s := p.c.Status().Rate.Share; s > 50 {
					t.Fatalf("after %v: pod %d's share is %.2f/s, want at most limit / pods (50/s)", lose, i, s)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		if r, _ := counts(); len(lose) == 2 && r < r0+1 {
			t.Errorf("a quota hash of the wrong type was not counted in Sync.Malformed")
		}
		settle(t, pods, 100)
	}
}

// TestPauseFromRedisIsBounded: a pause key with no end is deleted
// (malformed), one of an hour is cut to the pod's CALL_TIMEOUT (capped),
// in the pod and in Redis; on the channel, a pause that is not a number
// or negative is ignored (malformed), one of years cut (capped).
func TestPauseFromRedisIsBounded(t *testing.T) {
	t.Parallel()
	pods, f, counts := trustQuotaPods(t, "qpause")
	pause := f.base + ":pause"
	r0, c0 := counts()
	f.do(t, "SET", pause, "1")
	waitFor(t, syncWait, "the endless pause malformed", func() bool {
		r, _ := counts()
		return r >= r0+1
	})
	for i, p := range pods {
		if st := p.c.Status().Rate; !st.PausedUntil.IsZero() {
			t.Errorf("pod %d paused until %v by a pause with no end, want none", i, st.PausedUntil)
		}
	}
	f.do(t, "SET", pause, "1", "PX", "3600000")
	waitFor(t, syncWait, "the hour's pause capped, every pod paused", func() bool {
		_, c := counts()
		return c >= c0+1 && !pods[0].c.Status().Rate.PausedUntil.IsZero() && !pods[1].c.Status().Rate.PausedUntil.IsZero()
	})
	for i, p := range pods {
		if d := time.Until(p.c.Status().Rate.PausedUntil); d > 5*time.Second {
			t.Errorf("pod %d paused for %v by a pause of an hour, want at most its CALL_TIMEOUT (5s)", i, d)
		}
	}
	if ttl, _ := strconv.Atoi(f.do(t, "PTTL", pause)); ttl > 5000 {
		t.Errorf("the pause key lives %dms in Redis, want it cut to 5000", ttl)
	}

	f.do(t, "DEL", pause)
	r0, c0 = counts()
	f.do(t, "PUBLISH", f.channel, "payments pause soon")
	f.do(t, "PUBLISH", f.channel, "payments pause -5")
	f.do(t, "PUBLISH", f.channel, "payments pause 99999999999")
	waitFor(t, syncWait, "the messages malformed and capped", func() bool {
		r, c := counts()
		return r >= r0+4 && c >= c0+2 // each pod reads each message
	})
	for i, p := range pods {
		if d := time.Until(p.c.Status().Rate.PausedUntil); d > 5*time.Second {
			t.Errorf("pod %d paused for %v by a message, want at most its CALL_TIMEOUT (5s)", i, d)
		}
	}
}

// fillGarbage fills the hash KEYS[1] with ARGV[1] fields "junk<i>" of
// value "x", a thousand to a command, and returns its length.
var fillGarbage = redis.NewScript(`
local n, batch = tonumber(ARGV[1]), {}
for i = 1, n do
  batch[#batch + 1] = 'junk' .. i
  batch[#batch + 1] = 'x'
  if #batch == 2000 then
    redis.call('HSET', KEYS[1], unpack(batch))
    batch = {}
  end
end
if #batch > 0 then redis.call('HSET', KEYS[1], unpack(batch)) end
return redis.call('HLEN', KEYS[1])
`)

// TestAHashOfGarbageHoldsRedisBriefly: another client writes 300,000
// fields no pod writes into the quota's hash. No script call of the pods
// holds Redis for long reading them (none in Redis's SLOWLOG past 50ms):
// the hash, far larger than any the fleet writes, is deleted whole and
// counted, and the pods share the limit again.
func TestAHashOfGarbageHoldsRedisBriefly(t *testing.T) {
	t.Parallel()
	pods, f, counts := trustQuotaPods(t, "qhuge")
	rdb := redis.NewClient(&redis.Options{Addr: f.srv.Addr(), DialTimeout: syncWait, ReadTimeout: syncWait, WriteTimeout: syncWait})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	quota := f.base + ":quota"
	// The hash is built aside and renamed into place, so that the pods
	// meet it whole: a pod's op between two of the writes would delete a
	// part of it and count it before the test looks.
	// Redis builds it itself: 300,000 fields made by a test binary that a
	// starved machine runs at the lowest priority would take its CPU
	// from the tests beside it.
	aside := quota + ":aside"
	n, err := fillGarbage.Run(ctx, rdb, []string{aside}, 300_000).Int()
	if err != nil || n != 300_000 {
		t.Fatalf("the garbage: %d fields, %v", n, err)
	}
	f.do(t, "CONFIG", "SET", "slowlog-log-slower-than", "50000")
	f.do(t, "SLOWLOG", "RESET")
	r0, _ := counts()
	f.do(t, "RENAME", aside, quota)
	waitFor(t, syncWait, "the garbage malformed", func() bool {
		r, _ := counts()
		return r > r0
	})
	settle(t, pods, 100)
	log, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		if len(e.Args) > 0 && strings.HasPrefix(strings.ToLower(e.Args[0]), "eval") {
			t.Errorf("a script call held Redis %v (want at most 50ms): %.60v", e.Duration, e.Args)
		}
	}
	if n, _ := rdb.HLen(ctx, quota).Result(); n > 10 {
		t.Errorf("the quota's hash holds %d fields, want the garbage gone", n)
	}
}
