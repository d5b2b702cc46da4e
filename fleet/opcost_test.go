package fleet

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// BenchmarkOpCost measures the Redis CPU (commandstats) of the batch
// script's steady ops, per op: 5 pods x 8 systems, each pod's tick one
// call of the 8 systems' syncs (with requests and no failures; every
// other tick the periodic read), or one of their quotas, as in a busy
// fleet. sync is the steady sync, whose window is read back only when a
// bucket opens; sync-read reads it back every time, as a sync with
// failures does. Finer than
// BenchmarkRedisCost, for comparing one script's text with another's; on
// a shared machine, wall-clock figures are noisy: OPCOST_ADDR points it
// at a Redis of one's own (say, under valgrind --tool=callgrind, whose
// instruction counts do not depend on the load).
//
//	go test -run '^$' -bench OpCost -benchtime 400x ./fleet/
func BenchmarkOpCost(b *testing.B) {
	for _, kind := range []string{"sync", "sync-read", "quota"} {
		b.Run(kind, func(b *testing.B) { opCost(b, kind) })
	}
}

func opCost(b *testing.B, kind string) {
	srv := redistest.Start(b)
	addr := srv.Addr()
	if a := os.Getenv("OPCOST_ADDR"); a != "" {
		addr = a // a server to profile
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	run := func(ops []*op) {
		bt := &batch{ops: ops}
		keys, argv := bt.args(false)
		if err := batchScript.Run(ctx, rdb, keys, argv...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	const pods, systems = 5, 8
	tick := func(i int) {
		for p := range pods {
			var syncs, quotas []*op
			for s := range systems {
				base := fmt.Sprintf("outbound:fleet:{cost}:s%02d", s)
				ba := breakerArgs{base: base, channel: "outbound:fleet:{cost}", system: fmt.Sprintf("s%02d", s), open: 30 * time.Second}
				syncs = append(syncs, newOp(syncCall{breakerArgs: ba, requests: 40, bucket: time.Second, buckets: windowBuckets,
					minRequests: 20, ratio: 0.5, mostForce: time.Hour, readForce: (i+p)%2 == 0, readTotals: kind == "sync-read"}, nil, nil))
				quotas = append(quotas, newOp(quotaCall{base: base, holder: fmt.Sprintf("pod%d", p), limit: 100000e6, demand: 20e6 + int64(i%3),
					ack: 20000e6, most: 100000e6, life: 9 * time.Second, longestPause: time.Minute, lostCap: 20000e6,
					period: 2 * time.Second, longestLife: 9 * time.Second, mostFields: 4*1000 + 1024}, nil, nil))
			}
			if kind != "quota" {
				run(syncs)
			} else {
				run(quotas)
			}
		}
	}
	for i := range 20 {
		tick(i)
	}
	srv.Do("CONFIG", "RESETSTAT")
	cpu0, _ := srv.CPU()
	b.ResetTimer()
	for i := range b.N {
		tick(i)
	}
	b.StopTimer()
	cpu1, _ := srv.CPU()
	st, err := srv.CommandStats()
	if err != nil {
		b.Fatal(err)
	}
	ev := st["evalsha"]
	if ev.Calls == 0 {
		ev = st["eval"]
	}
	ops := float64(b.N * pods * systems)
	b.ReportMetric(float64(ev.Usec)/ops, "script-us/op")
	b.ReportMetric(float64(ev.Usec)/float64(ev.Calls), "us/call")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/ops, "cpu-us/op")
	inner := 0
	for name, s := range st {
		if name != "evalsha" && name != "eval" && name != "config" && name != "info" && name != "script" {
			inner += s.Calls
		}
	}
	b.ReportMetric(float64(inner)/float64(ev.Calls), "inner/call")
	b.ReportMetric(0, "ns/op")
}
