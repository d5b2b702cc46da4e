package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
)

// FuzzParseMessage: whatever the channel carries, parseMessage never
// panics, and what it reads, formatted again, reads the same.
func FuzzParseMessage(f *testing.F) {
	for _, seed := range []string{
		"payments 3 1 2000", "payments 4 0 0", "payments pause 1500", "payments force open 60000",
		"payments force - 0", "hello pod-1", "payments pause soon", "payments force maybe 5", "a b", "",
		"payments  3 1 2", "hello 1 2 3", "x 9223372036854775807 1 -1", "payments +3 1 2",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		m, err := parseMessage(payload)
		if err != nil {
			return
		}
		again, err := parseMessage(m.Format())
		if err != nil || again != m {
			t.Fatalf("%q read as %+v, formatted %q, read again as %+v (%v)", payload, m, m.Format(), again, err)
		}
	})
}

// TestEveryMessageTheScriptsPublishReads: the messages the fleet
// publishes through Redis (a state changed by the trip op, a pause, an
// override and its release, a pod's hello) read as what was sent.
func TestEveryMessageTheScriptsPublishReads(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	f, c := newPod(t, srv, "msgs", testSettings)
	waitFor(t, syncWait, "sync", f.synced.Load)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: syncWait, ReadTimeout: syncWait, WriteTimeout: syncWait})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps := rdb.Subscribe(ctx, f.channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := runOp(c, tripOf(0)); err != nil {
		t.Fatal(err)
	}
	pause := pauseCall{base: c.base, channel: f.channel, system: c.name, pause: 1500 * time.Millisecond}
	if err := f.runOps(ctx, newOp(pause, func([]int64, error) {}, nil)); err != nil {
		t.Fatal(err)
	}
	target := forceTarget{c.base, f.channel, c.name}
	for _, st := range []observe.BreakerState{observe.BreakerOpen, ""} {
		if err := target.write(ctx, rdb, st, 60000); err != nil {
			t.Fatal(err)
		}
	}
	hello := message{kind: helloMessage, system: "pod-1"}.Format()
	if err := checkScript.Run(ctx, rdb, []string{"check"}, f.channel, hello, 1000).Err(); err != nil {
		t.Fatal(err)
	}
	want := []message{
		{kind: stateMessage, system: "payments", ver: 1, s: 1},
		{kind: pauseMessage, system: "payments", ms: 1500},
		{kind: forceMessage, system: "payments", force: observe.BreakerOpen, ms: 60000},
		{kind: forceMessage, system: "payments", ms: 60000},
		{kind: helloMessage, system: "pod-1"},
	}
	for i, w := range want {
		got, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, err := parseMessage(got.Payload)
		if w.kind == stateMessage { // the time left open is Redis's to count
			if err == nil && m.ms > 0 && m.ms <= testSettings.openTimeout.Milliseconds() {
				m.ms = 0
			}
		}
		if err != nil || m != w {
			t.Errorf("message %d: %q read as %+v (%v), want %+v", i, got.Payload, m, err, w)
		}
	}
}
