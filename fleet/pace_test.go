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
	// rate is the round trips a second the pod made over d: what it sent,
	// at most what its tick allows however slowly a starved machine runs.
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
	tickIs := func(what string, want time.Duration) {
		t.Helper()
		waitFor(t, syncWait, what, func() bool { return p.fleet.Tick() == want })
	}
	tickIs("the tick of a pod alone", 200*time.Millisecond)
	alone := rate(time.Second)
	// The others say they are alive as pods do: each entry for less than
	// a pod's life (3s), written again well before it ends.
	crowdCtx, endCrowd := context.WithCancel(ctx)
	var crowdWG sync.WaitGroup
	alive(499, 2500*time.Millisecond)
	crowdWG.Go(func() {
		for sleepCtx(crowdCtx, 500*time.Millisecond); crowdCtx.Err() == nil; sleepCtx(crowdCtx, 500*time.Millisecond) {
			if err := writeAlive(srv, "pace", 499, 2500*time.Millisecond); err != nil {
				t.Error(err)
				return
			}
		}
	})
	tickIs("the tick among 500 pods", 2*time.Second)
	crowd := rate(3 * time.Second)
	endCrowd()
	crowdWG.Wait()
	alive(499, time.Millisecond) // their entries end: the pod's count drops them
	waitFor(t, syncWait, "the others gone", func() bool {
		n, _ := srv.Do("ZCARD", pods)
		return n == "1"
	})
	tickIs("the tick alone again", 200*time.Millisecond)
	again := rate(time.Second)
	t.Logf("round trips a second: alone %.1f; among 500 pods %.1f; alone again %.1f", alone, crowd, again)
	if alone > 6 || again > 6 { // 5: one a tick, and one a count may add
		t.Errorf("alone, a busy pod made %.1f then %.1f round trips a second, want at most about 5 (every 200ms)", alone, again)
	}
	if crowd > 1 {
		t.Errorf("among 500 pods, a busy pod made %.1f round trips a second, want at most 3 in 3s (every 2s)", crowd)
	}

	r0 := p.fleet.Sync().Malformed
	alive(1, time.Hour)
	waitFor(t, syncWait, "a pod alive for an hour dropped and counted", func() bool {
		n, _ := srv.Do("ZCARD", pods)
		return n == "1" && p.fleet.Sync().Malformed > r0
	})
	p.reg.Close()
	p.fleet.Close()
	if n, _ := srv.Do("ZCARD", pods); n != "0" {
		t.Errorf("%s pods counted after the last closed, want 0", n)
	}
}
