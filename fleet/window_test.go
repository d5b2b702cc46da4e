package fleet

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// windowOn runs the sync op of one system on a redis-server of its own,
// with buckets of about 30 years (windowBucket): a test's syncs fall in
// one bucket, whatever the time they take.
type windowOn struct {
	t   *testing.T
	rdb *redis.Client
	ba  breakerArgs
}

func newWindow(t *testing.T) windowOn {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: syncWait, ReadTimeout: syncWait, WriteTimeout: syncWait})
	t.Cleanup(func() { rdb.Close() })
	ba := breakerArgs{base: "outbound:fleet:{w}:payments", channel: "outbound:fleet:{w}", system: "payments", open: time.Minute}
	return windowOn{t: t, rdb: rdb, ba: ba}
}

// sync sends requests and failures; it returns whether the state is
// open, and the window's totals of the reply.
func (w windowOn) sync(requests, failures uint64, readTotals bool) (open bool, r syncReply) {
	open, r, _ = w.syncMalformed(requests, failures, readTotals)
	return open, r
}

// syncMalformed is sync, and the values the op found malformed.
func (w windowOn) syncMalformed(requests, failures uint64, readTotals bool) (open bool, r syncReply, malformed int64) {
	w.t.Helper()
	call := syncCall{breakerArgs: w.ba, requests: requests, failures: failures, bucket: windowBucket,
		buckets: windowBuckets, minRequests: 20, ratio: 0.5, mostForce: time.Hour, readTotals: readTotals}
	reply, err := runAlone(w.rdb, call)
	if err != nil || len(reply) != 5+syncOwn {
		w.t.Fatalf("sync op: %v %v", reply, err)
	}
	return reply[1] == 1, readSyncReply(reply[5:]), reply[3]
}

const windowBucket = time.Duration(1e18)

// fields is the window of version 0's fields and values.
func (w windowOn) fields() map[string]string {
	w.t.Helper()
	m, err := w.rdb.HGetAll(context.Background(), w.ba.base+":win:0").Result()
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

// TestSyncReadsTheWindowWhenTheRuleMayChange: requests alone go into the
// fleet's window without reading it back, but for the first count of a
// bucket; failures read it and judge the rule, as a breaker judges its
// counts at a failure; a pod that asks for the totals gets them.
func TestSyncReadsTheWindowWhenTheRuleMayChange(t *testing.T) {
	t.Parallel()
	w := newWindow(t)
	if _, r := w.sync(10, 0, false); r.requests != 10 || r.failures != 0 {
		t.Fatalf("the bucket's first count: totals %d/%d, want 10/0 (read: a bucket opens)", r.requests, r.failures)
	}
	if _, r := w.sync(5, 0, false); r.requests != totalsNotRead || r.failures != totalsNotRead {
		t.Errorf("requests alone into an open bucket: totals %d/%d, want not read", r.requests, r.failures)
	}
	if got := w.fields(); len(got) != 1 || got[bucketField(w, "r")] != "15" {
		t.Errorf("window %v, want the requests counted without a read (15 in one field)", got)
	}
	if _, r := w.sync(0, 0, true); r.requests != 15 || r.failures != 0 {
		t.Errorf("asked for the totals: %d/%d, want 15/0", r.requests, r.failures)
	}
	// 15 successes and 3 failures in 18: under BREAKER_MIN_REQUESTS 20.
	if open, r := w.sync(3, 3, false); open || r.requests != 18 || r.failures != 3 {
		t.Errorf("failures: open %v, totals %d/%d, want closed, 18/3 (read)", open, r.requests, r.failures)
	}
	// Successes lift the window to 20 requests, 3 of them failed; 20
	// more calls that all fail break the rule (23 of 40).
	w.sync(2, 0, false)
	if open, _ := w.sync(20, 20, false); !open {
		t.Errorf("40 requests with 23 failures in the window: closed, want open (ratio 0.5, at least 20)")
	}
	if got := w.fields(); len(got) != 0 {
		t.Errorf("window after the trip: %v, want deleted", got)
	}
}

// TestSyncOfRequestsAloneTakesNoForeignField: another client writes a
// field that is no count where the pods count this bucket's requests, or
// makes the window a key of another type. A sync of requests alone then
// reads the window, deletes what no pod wrote (counted as malformed) and
// counts its requests in a window of its own.
func TestSyncOfRequestsAloneTakesNoForeignField(t *testing.T) {
	t.Parallel()
	w := newWindow(t)
	w.sync(1, 0, false)
	ctx := context.Background()
	win := w.ba.base + ":win:0"
	for _, forge := range []func() error{
		func() error { return w.rdb.HSet(ctx, win, bucketField(w, "r"), "many").Err() },
		func() error { return w.rdb.HSet(ctx, win, bucketField(w, "r"), "9223372036854775807").Err() },
		func() error { return w.rdb.Set(ctx, win, "not a hash", 0).Err() },
	} {
		if err := forge(); err != nil {
			t.Fatal(err)
		}
		_, r, malformed := w.syncMalformed(4, 0, false)
		if r.requests != 4 || r.failures != 0 || malformed != 1 {
			t.Errorf("after a forged window: totals %d/%d, %d malformed, want 4/0 and 1 (the forgery deleted, the requests counted)",
				r.requests, r.failures, malformed)
		}
	}
}

// bucketField is the name of the field of the bucket of now of side r
// or f.
func bucketField(w windowOn, side string) string {
	w.t.Helper()
	tm, err := w.rdb.Time(context.Background()).Result()
	if err != nil {
		w.t.Fatal(err)
	}
	return side + strconv.FormatInt(tm.UnixMilli()/windowBucket.Milliseconds(), 10)
}
