package fleet_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/outboundtest"
)

// TestTickFollowsTheFleetsSize: a busy pod (every tick has counts to
// flush) talks to Redis every FlushInterval (200ms) alone; once it counts
// 500 pods alive (499 written by the test, as pods say they are alive)
// it talks every 2s (FlushInterval x 10), and every 200ms again once
// they are gone. A pod written alive past any pod's life is dropped and
// counted (Sync.Malformed). A pod that closes takes itself out of the
// count.
func TestTickFollowsTheFleetsSize(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	p := startPods(t, 1, srv, "pace", "fleet", up.URL, nil)[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		for ctx.Err() == nil {
			get(ctx, p.c)
			sleepCtx(ctx, 10*time.Millisecond)
		}
	})
	const pods = "outbound:fleet:{pace}:pods"
	alive := func(n int, life time.Duration) {
		t.Helper()
		if err := writeAlive(srv, "pace", n, life); err != nil {
			t.Fatal(err)
		}
	}
	rate := func(d time.Duration) float64 {
		t.Helper()
		if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		st, err := srv.CommandStats()
		if err != nil {
			t.Fatal(err)
		}
		return float64(st["evalsha"].Calls) / d.Seconds()
	}
	alone := rate(time.Second)
	alive(499, 2500*time.Millisecond)   // alive for less than a pod's life (3s)
	time.Sleep(1200 * time.Millisecond) // counted within a ReadInterval and a tick of 200ms
	crowd := rate(3 * time.Second)
	waitFor(t, 5*time.Second, "the others gone", func() bool {
		n, _ := srv.Do("ZCARD", pods)
		return n == "1" // the pod's count dropped them, and its tick followed
	})
	again := rate(time.Second)
	t.Logf("round trips a second: alone %.1f; among 500 pods %.1f; alone again %.1f", alone, crowd, again)
	if alone < 3 || again < 3 { // 5 at rest; a loaded machine may slip a tick or two
		t.Errorf("alone, a busy pod made %.1f then %.1f round trips a second, want about 5 (every 200ms)", alone, again)
	}
	if crowd > 1 {
		t.Errorf("among 500 pods, a busy pod made %.1f round trips a second, want at most 2 in 3s (every 2s)", crowd)
	}

	r0 := p.fleet.Sync().Malformed
	alive(1, time.Hour)
	waitFor(t, 3*time.Second, "a pod alive for an hour dropped and counted", func() bool {
		n, _ := srv.Do("ZCARD", pods)
		return n == "1" && p.fleet.Sync().Malformed > r0
	})
	p.reg.Close()
	p.fleet.Close()
	if n, _ := srv.Do("ZCARD", pods); n != "0" {
		t.Errorf("%s pods counted after the last closed, want 0", n)
	}
}
