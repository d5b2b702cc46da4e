package fleet_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// forcedOn reports whether p's breaker shows state forced.
func forcedOn(p *pod, state observe.BreakerState) bool {
	f := p.c.Status().Forced
	if state == "" {
		return f == nil
	}
	return f != nil && f.State == state
}

// everyPod waits until cond holds on every pod and returns how long the
// last one took.
func everyPod(t *testing.T, pods []*pod, d time.Duration, what string, cond func(*pod) bool) time.Duration {
	t.Helper()
	return waitFor(t, d, what, func() bool {
		for _, p := range pods {
			if !cond(p) {
				return false
			}
		}
		return true
	})
}

// readAfter waits until every pod has read every state back (the
// periodic read, Config.ReadInterval) with a read that began after the
// call: two reads, since the one in flight may have begun before. It
// returns how long that took. What a pod shows then is what it read, the
// test's to judge, however slowly a starved machine ran the reads.
func readAfter(t *testing.T, pods []*pod) time.Duration {
	t.Helper()
	from := make([]uint64, len(pods))
	for i, p := range pods {
		from[i] = p.fleet.Reads()
	}
	return waitFor(t, syncWait, "a read of every state on every pod", func() bool {
		for i, p := range pods {
			if p.fleet.Reads() < from[i]+2 {
				return false
			}
		}
		return true
	})
}

// checkForced fails t unless every pod shows state forced (none when
// state is empty).
func checkForced(t *testing.T, pods []*pod, what string, state observe.BreakerState) {
	t.Helper()
	for i, p := range pods {
		if !forcedOn(p, state) {
			t.Errorf("%s: pod %d shows %+v, want forced %q", what, i, p.c.Status().Forced, state)
		}
	}
}

// TestForcedOpenReachesEveryPod: an operator forces the fleet's breaker
// open on one of 5 pods: every pod refuses its calls within the
// propagation bound (one message: the calls the others send after the
// override are counted as openTogether counts them), a pod started
// afterwards reads it, a release from another pod reaches them all by
// their next read at the latest, and an override left alone ends at its
// time on every pod, and in Redis.
func TestForcedOpenReachesEveryPod(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	pods := startPods(t, 5, srv, "force", "fleet", up.URL, nil)
	if err := pods[0].c.Force(observe.BreakerOpen, time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), syncWait)
	defer cancel()
	var callers []openCaller
	for _, p := range pods {
		callers = append(callers, openCaller{"payments", p.c})
	}
	checkOpenTogether(t, callUntilOpen(ctx, callers))
	checkForced(t, pods, "forced open", observe.BreakerOpen)
	for i, p := range pods {
		if err := get(context.Background(), p.c); !errors.Is(err, registry.ErrCircuitOpen) {
			t.Errorf("pod %d: a call while forced open: %v, want ErrCircuitOpen", i, err)
		}
	}
	late := startPods(t, 1, srv, "force", "fleet", up.URL, nil)
	restart := readAfter(t, late)
	checkForced(t, late, "a pod started after the override", observe.BreakerOpen)
	pods = append(pods, late...)

	if err := pods[2].c.Force("", 0); err != nil {
		t.Fatal(err)
	}
	released := readAfter(t, pods)
	checkForced(t, pods, "released", "")
	for i, p := range pods {
		if err := get(context.Background(), p.c); err != nil {
			t.Errorf("pod %d: a call after the release: %v", i, err)
		}
	}

	if err := pods[1].c.Force(observe.BreakerClosed, time.Second); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(time.Second)
	// The message reaches every pod in a few milliseconds on a quiet
	// machine; a starved one may see the override only after its end.
	everyPod(t, pods, syncWait, "forced closed, or its time passed", func(p *pod) bool {
		return forcedOn(p, observe.BreakerClosed) || time.Now().After(end)
	})
	last := end // the latest end a pod holds
	for i, p := range pods {
		f := p.c.Status().Forced
		if f == nil {
			continue // its time passed before the check
		}
		until := f.Until
		if until.After(end.Add(100 * time.Millisecond)) {
			t.Errorf("pod %d: forced closed until %v, want about %v", i, until, end)
		}
		if until.After(last) {
			last = until
		}
	}
	// Each pod reads the override's end itself: once its time has passed,
	// no pod holds it, with no message or timer needed, however late a
	// starved machine runs this check.
	time.Sleep(time.Until(last) + time.Millisecond)
	for i, p := range pods {
		if f := p.c.Status().Forced; f != nil && f.Until.After(last) {
			// It read the override only after the others' check (a
			// starved machine ran its read late): the time left then.
			time.Sleep(time.Until(f.Until) + time.Millisecond)
		}
		if !forcedOn(p, "") {
			t.Errorf("pod %d: still forced (%+v) after the override's end", i, p.c.Status().Forced)
		}
	}
	over := time.Since(last)
	if v, err := srv.Do("EXISTS", "outbound:fleet:{force:payments}:force"); err != nil || v != "0" {
		t.Errorf("the override is still in Redis after its end: %q %v", v, err)
	}
	t.Logf("a pod started after the override read it in %v; released on all 6 by their next read, %v; an override of 1s ended on all, checked %v after its time",
		restart, released, over)
}

// TestForceWithoutARegistry: the operator's command forces a system's
// breaker for the whole fleet and releases it through fleet.Force alone;
// it refuses what the registry refuses, and its errors never show the
// Redis password.
func TestForceWithoutARegistry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	pods := startPods(t, 3, srv, "cli", "fleet", up.URL, nil)
	cfg := fleet.Config{RedisURL: srv.URL(), Namespace: "cli"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fleet.Force(ctx, cfg, "payments", observe.BreakerOpen, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var callers []openCaller
	for _, p := range pods {
		callers = append(callers, openCaller{"payments", p.c})
	}
	checkOpenTogether(t, callUntilOpen(ctx, callers))
	checkForced(t, pods, "forced open", observe.BreakerOpen)
	if err := fleet.Force(ctx, cfg, "payments", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	readAfter(t, pods)
	checkForced(t, pods, "released", "")

	for _, c := range []struct {
		name   string
		cfg    fleet.Config
		system string
		state  observe.BreakerState
		until  time.Time
		want   string
	}{
		{"half-open", cfg, "payments", observe.BreakerHalfOpen, time.Now().Add(time.Hour), `not "half-open"`},
		{"past", cfg, "payments", observe.BreakerOpen, time.Now().Add(-time.Second), "forced until a time"},
		{"past a day", cfg, "payments", observe.BreakerOpen, time.Now().Add(25 * time.Hour), "forced until a time"},
		{"bad name", cfg, "Pay ments", observe.BreakerOpen, time.Now().Add(time.Hour), "lower case letters"},
		{"no redis", fleet.Config{Namespace: "cli"}, "payments", observe.BreakerOpen, time.Now().Add(time.Hour), "no Redis URL"},
		{"redis down", fleet.Config{RedisURL: "redis://:s3cret@127.0.0.1:1", Namespace: "cli"}, "payments", observe.BreakerOpen, time.Now().Add(time.Hour), "forcing the breaker"},
	} {
		err := fleet.Force(ctx, c.cfg, c.system, c.state, c.until)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want an error saying %q (and no password)", c.name, err, c.want)
		}
	}
}

// TestForcedFromRedisIsInput: an override of another client is read as
// input: a value that is not open or closed is deleted (Sync.Malformed);
// one with no end, or on the channel of years, is cut to 24 hours
// (Sync.Capped), in the pods and in Redis; a message of another state is
// ignored.
func TestForcedFromRedisIsInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	pods := startPods(t, 2, srv, "fin", "fleet", up.URL, nil)
	f := newForeign(srv, "fin")
	key := f.base + ":force"
	counts := func() (malformed, capped uint64) { // of both pods
		for _, p := range pods {
			s := p.fleet.Sync()
			malformed, capped = malformed+s.Malformed, capped+s.Capped
		}
		return malformed, capped
	}
	r0, c0 := counts()
	f.do(t, "SET", key, "maybe")
	waitFor(t, syncWait, "the garbage malformed", func() bool {
		r, _ := counts()
		return r > r0 || f.do(t, "EXISTS", key) == "0"
	})
	if forcedOn(pods[0], "") == false || forcedOn(pods[1], "") == false {
		t.Error("garbage forced a breaker")
	}
	f.do(t, "SET", key, "open") // no message: the pods read it
	read := readAfter(t, pods)
	checkForced(t, pods, "an override written with no message, after a read", observe.BreakerOpen)
	t.Logf("an override written with no message: read by both pods by their next read, %v later (Config.ReadInterval 1s)", read)
	for i, p := range pods {
		if d := time.Until(p.c.Status().Forced.Until); d > 24*time.Hour {
			t.Errorf("pod %d: forced for %v by an override with no end, want at most 24h", i, d)
		}
	}
	if ttl, _ := strconv.ParseInt(f.do(t, "PTTL", key), 10, 64); ttl <= 0 || ttl > (24*time.Hour).Milliseconds() {
		t.Errorf("the override lives %dms in Redis, want it cut to 24h", ttl)
	}
	if _, c := counts(); c <= c0 {
		t.Errorf("an override with no end was not counted in Sync.Capped")
	}
	// The messages come with the key that says the same, as an
	// operator's Force writes them: a pod that reads the key back between
	// a message and the check below sees the same override.
	f.do(t, "SET", key, "closed", "PX", "3600000")
	r0, c0 = counts()
	f.do(t, "PUBLISH", f.channel, "payments force closed 99999999999")
	f.do(t, "PUBLISH", f.channel, "payments force shut 5000")
	f.do(t, "PUBLISH", f.channel, "payments force open")
	waitFor(t, syncWait, "the messages read", func() bool {
		r, c := counts()
		return r >= r0+4 && c >= c0+2 // each pod reads each message
	})
	for i, p := range pods {
		if !forcedOn(p, observe.BreakerClosed) {
			t.Errorf("pod %d: %+v, want forced closed by the capped message", i, p.c.Status().Forced)
		} else if d := time.Until(p.c.Status().Forced.Until); d > 24*time.Hour {
			t.Errorf("pod %d: forced for %v by a message of years, want at most 24h", i, d)
		}
	}
}

// TestOverrideWithoutItsMessageIsReadWhileAQuotaSyncs: a pod whose
// systems at scope fleet have a quota too talks to Redis on every tick
// for the quota's sake; it must still read the breaker's state and the
// operator's override back every Config.ReadInterval, or an override
// whose message was lost would never reach it.
func TestOverrideWithoutItsMessageIsReadWhileAQuotaSyncs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	pods := startPods(t, 3, srv, "forcequota", "fleet", up.URL, quotaEnv("100/s", nil))
	f := newForeign(srv, "forcequota")
	f.do(t, "SET", f.base+":force", "open", "PX", "60000") // no message
	d := readAfter(t, pods)
	checkForced(t, pods, "an override written without its message, after a read", observe.BreakerOpen)
	t.Logf("an override written without its message: read by every pod by its next read, %v later (ReadInterval 1s)", d)
}

// forceLog is an observer that records the overrides it is told of.
type forceLog struct {
	mu  sync.Mutex
	got []observe.BreakerState
}

func (*forceLog) ObserveAttempt(observe.AttemptEvent)                               {}
func (*forceLog) ObserveCall(observe.CallEvent)                                     {}
func (*forceLog) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}

func (l *forceLog) ObserveForce(_ string, state observe.BreakerState, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, state)
}

func (l *forceLog) states() []observe.BreakerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// TestEveryPodsObserversHearOfAnOverride: an override forced on one pod,
// or without a registry (the command line), is told to the observers of
// every pod (their log record and the forced metric), once per change:
// the pod that forced it hears of it once, not again from its own
// message, and the periodic reads of the override are not news.
func TestEveryPodsObserversHearOfAnOverride(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	logs := []*forceLog{{}, {}, {}}
	var pods []*pod
	for _, l := range logs {
		pods = append(pods, startPods(t, 1, srv, "forcelog", "fleet", up.URL, nil, registry.WithObserver(l))...)
	}
	want := func(what string, states ...observe.BreakerState) {
		t.Helper()
		waitFor(t, syncWait, what, func() bool {
			for _, l := range logs {
				if len(l.states()) < len(states) {
					return false
				}
			}
			return true
		})
		readAfter(t, pods) // a periodic read, and the message long since, which must not be news
		for i, l := range logs {
			if got := l.states(); !slices.Equal(got, states) {
				t.Errorf("%s: pod %d's observer was told %q, want %q", what, i, got, states)
			}
		}
	}
	if err := pods[0].c.Force(observe.BreakerOpen, time.Minute); err != nil {
		t.Fatal(err)
	}
	want("forced open on pod 0", observe.BreakerOpen)
	if err := fleet.Force(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: "forcelog"}, "payments", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	want("released from the command line", observe.BreakerOpen, "")
}
