package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// The fleet's Redis is shared ground: another client may write anything
// under the namespace. These tests play that client (the foreign writes)
// and hold the pods to the rule: no pod holds the breaker open past now +
// BREAKER_OPEN_TIMEOUT, so once the writes stop every pod serves a healthy
// upstream again (on a quiet machine within 2 x BREAKER_OPEN_TIMEOUT, as
// the tests log), and nothing a pod writes back is a state it would not
// accept itself.

const trustOpen = time.Second // BREAKER_OPEN_TIMEOUT of the trust tests

// foreign is the namespace's keys and channel, as another client sees them.
type foreign struct {
	srv     *redistest.Server
	state   string // the system's state hash
	base    string // prefix of the system's keys
	channel string
}

func newForeign(srv *redistest.Server, ns string) foreign {
	base := "outbound:fleet:{" + ns + ":payments}"
	return foreign{srv: srv, state: base + ":state", base: base, channel: "outbound:fleet:" + ns}
}

func (f foreign) do(t *testing.T, words ...string) string {
	t.Helper()
	r, err := f.srv.Do(words...)
	if err != nil {
		t.Fatalf("%v: %v", words, err)
	}
	return r
}

// trustPods starts n pods at scope fleet on a healthy upstream (unless
// failing is set) with an open timeout of trustOpen and one probe.
func trustPods(t *testing.T, n int, srv *redistest.Server, ns string, failing *atomic.Bool) []*pod {
	t.Helper()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing != nil && failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	return startPods(t, n, srv, ns, "fleet", up.URL, map[string]string{
		"PAYMENTS_BREAKER_OPEN_TIMEOUT":     trustOpen.String(),
		"PAYMENTS_BREAKER_HALF_OPEN_PROBES": "1",
		"PAYMENTS_BREAKER_MIN_REQUESTS":     "5",
		"PAYMENTS_BREAKER_WINDOW":           "10s", // successes before a failing phase age out, failures from a slow caller do not
	})
}

// allOpen calls every pod every 5ms until each has said open, or
// half-open, which follows open only (not necessarily at once: on a
// starved machine a pod's open of BREAKER_OPEN_TIMEOUT may end before
// another's begins, or before the poll comes back to it).
func allOpen(t *testing.T, pods []*pod) {
	t.Helper()
	seen := make([]bool, len(pods))
	waitFor(t, syncWait, "every pod open", func() bool {
		open := 0
		for i, p := range pods {
			// Half-open comes only after open: a pod seen half-open took
			// the open, whose time (trustOpen) a starved poll may miss.
			st := p.c.Status().Breaker
			seen[i] = seen[i] || st == observe.BreakerOpen || st == observe.BreakerHalfOpen
			if seen[i] {
				open++
				continue
			}
			get(context.Background(), p.c)
		}
		time.Sleep(5 * time.Millisecond)
		return open == len(pods)
	})
}

// servedAgain calls each pod every 10ms until each has had a call answered
// by the upstream, and returns how long after since the last one was.
// Meanwhile no pod may hold the fleet's breaker open past now +
// BREAKER_OPEN_TIMEOUT (trustOpen): an open time read from Redis is cut
// to that when it is read, so once it passes the pod probes and serves,
// however slowly a starved machine gets there.
func servedAgain(t *testing.T, pods []*pod, since time.Time) time.Duration {
	t.Helper()
	served := make([]bool, len(pods))
	left := len(pods)
	for left > 0 {
		if time.Since(since) > syncWait {
			var states []string
			for _, p := range pods {
				states = append(states, string(p.c.Status().Breaker))
				t.Logf("pod: fleet %+v, %+v; local %+v", p.fleet.Systems(), p.fleet.Sync(), p.c.Status().BreakerCounts)
			}
			t.Fatalf("%d of %d pods not serving a healthy upstream %v after the writes stopped (breakers %v)", left, len(pods), syncWait, states)
		}
		for i, p := range pods {
			for _, st := range p.fleet.Systems() {
				if lim := time.Now().Add(trustOpen + 100*time.Millisecond); st.State == "open" && st.OpenUntil.After(lim) {
					t.Fatalf("pod %d holds the breaker open until %v, %v past now + BREAKER_OPEN_TIMEOUT",
						i, st.OpenUntil, st.OpenUntil.Sub(lim)+100*time.Millisecond)
				}
			}
			if !served[i] && get(context.Background(), p.c) == nil {
				served[i] = true
				left--
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(since)
}

// ms is a time as Redis's clock counts it (same machine): ms since 1970.
func ms(t time.Time) int64 { return t.UnixMilli() }

// TestOpenTimeFromRedisIsCappedByOpenTimeout: another client sets the
// fleet's state to open until 10^12 ms from now (about 31 years), in the
// state hash or on the channel, or sets it and deletes it. No pod holds
// it open past now + BREAKER_OPEN_TIMEOUT, every pod serves the healthy
// upstream again once the writes stop, and Redis never holds an open time past now +
// BREAKER_OPEN_TIMEOUT again: no pod writes the far open back.
func TestOpenTimeFromRedisIsCappedByOpenTimeout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	far := func() string { return strconv.FormatInt(ms(time.Now())+1e12, 10) }
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, f foreign)
	}{
		{"state hash", func(t *testing.T, f foreign) {
			f.do(t, "HSET", f.state, "v", "7", "s", "1", "u", far())
		}},
		{"published", func(t *testing.T, f foreign) {
			f.do(t, "PUBLISH", f.channel, "payments 9 1 1000000000000")
		}},
		{"state hash and message", func(t *testing.T, f foreign) {
			f.do(t, "HSET", f.state, "v", "7", "s", "1", "u", far())
			f.do(t, "PUBLISH", f.channel, "payments 7 1 1000000000000")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "cap-" + strings.ReplaceAll(tc.name, " ", "-")
			f := newForeign(srv, ns)
			pods := trustPods(t, 3, srv, ns, nil)
			tc.write(t, f)
			stopped := time.Now()
			allOpen(t, pods)
			d := servedAgain(t, pods, stopped)
			t.Logf("open for 10^12 ms (%s): every pod served again %v after the writes stopped", tc.name, d.Round(time.Millisecond))
			checkOpenBounded(t, f, 300*time.Millisecond)
		})
	}
	t.Run("deleted", func(t *testing.T) {
		f := newForeign(srv, "cap-deleted")
		pods := trustPods(t, 3, srv, "cap-deleted", nil)
		f.do(t, "HSET", f.state, "v", "7", "s", "1", "u", far())
		allOpen(t, pods)
		f.do(t, "DEL", f.state)
		stopped := time.Now()
		checkOpenBounded(t, f, 500*time.Millisecond) // a pod writes back its own (capped) view
		d := servedAgain(t, pods, stopped)
		t.Logf("open for 10^12 ms, then deleted: every pod served again %v after the delete", d.Round(time.Millisecond))
	})
}

// checkOpenBounded watches the state hash for d: an open time in it is
// never past now + BREAKER_OPEN_TIMEOUT (a little slack for the clocks).
func checkOpenBounded(t *testing.T, f foreign, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		s, u := f.do(t, "HGET", f.state, "s"), f.do(t, "HGET", f.state, "u")
		if s != "1" {
			continue
		}
		until, err := strconv.ParseInt(u, 10, 64)
		if err != nil {
			t.Fatalf("Redis holds an open time %q that is not an integer", u)
		}
		if lim := ms(time.Now()) + trustOpen.Milliseconds() + 100; until > lim {
			t.Fatalf("Redis holds open until %d, %v past now + BREAKER_OPEN_TIMEOUT", until, time.Duration(until-lim+100)*time.Millisecond)
		}
	}
}

// TestVersionsOutOfRangeAreRejected: versions are Lua numbers (doubles)
// in Redis, exact below 2^53. A message or a state with a version at or
// above 2^53, negative or not a number is ignored and counted; the last
// exact version, 2^53-1, is taken and does not stick. Either way the pods
// serve again (servedAgain), the fleet still opens on
// the pods' evidence and closes, and Redis never holds a version outside
// [0, 2^53) once a pod has read it.
func TestVersionsOutOfRangeAreRejected(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	soon := func() string { return strconv.FormatInt(ms(time.Now())+500, 10) }
	for i, tc := range []struct {
		name  string
		taken bool // a legal state: the pods open
		write func(t *testing.T, f foreign)
	}{
		{"message max int64 half-open", false, func(t *testing.T, f foreign) {
			f.do(t, "PUBLISH", f.channel, "payments 9223372036854775807 1 -1")
		}},
		{"message 2^53 open", false, func(t *testing.T, f foreign) {
			f.do(t, "PUBLISH", f.channel, "payments 9007199254740992 1 500")
		}},
		{"message negative", false, func(t *testing.T, f foreign) {
			f.do(t, "PUBLISH", f.channel, "payments -5 1 500")
		}},
		{"message 2^53-1 open", true, func(t *testing.T, f foreign) {
			f.do(t, "PUBLISH", f.channel, "payments 9007199254740991 1 500")
		}},
		{"state max int64", false, func(t *testing.T, f foreign) {
			f.do(t, "HSET", f.state, "v", "9223372036854775807", "s", "1", "u", soon())
		}},
		{"state 2^53-1", true, func(t *testing.T, f foreign) {
			f.do(t, "HSET", f.state, "v", "9007199254740991", "s", "1", "u", soon())
		}},
		{"state not a number", false, func(t *testing.T, f foreign) {
			f.do(t, "HSET", f.state, "v", "seven", "s", "open", "u", "soon")
		}},
		{"state fractional", false, func(t *testing.T, f foreign) {
			f.do(t, "HSET", f.state, "v", "2.5", "s", "1", "u", soon())
		}},
		{"state not a hash", false, func(t *testing.T, f foreign) {
			f.do(t, "SET", f.state, "open")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := fmt.Sprintf("ver%d", i)
			f := newForeign(srv, ns)
			var failing atomic.Bool
			pods := trustPods(t, 3, srv, ns, &failing)
			tc.write(t, f)
			stopped := time.Now()
			if tc.taken {
				// Taken: every pod holds the version (its open of 500ms
				// may end before a starved pod's check sees it open).
				seen := make([]bool, len(pods))
				waitFor(t, syncWait, "every pod at the version written", func() bool {
					all := true
					for i, p := range pods {
						for _, st := range p.fleet.Systems() {
							seen[i] = seen[i] || st.Version == 1<<53-1
						}
						all = all && seen[i]
					}
					time.Sleep(5 * time.Millisecond)
					return all
				})
			} else {
				waitFor(t, syncWait, "the foreign value rejected", func() bool {
					for _, p := range pods {
						get(context.Background(), p.c) // a call: the pods read the state sooner
						if p.fleet.Sync().Malformed > 0 {
							return true
						}
					}
					time.Sleep(20 * time.Millisecond)
					return false
				})
			}
			d := servedAgain(t, pods, stopped)
			t.Logf("%s: every pod served %v after the write", tc.name, d.Round(time.Millisecond))
			waitFor(t, syncWait, "a version in range in Redis", func() bool { return versionInRange(t, f) })
			// The fleet still opens on the pods' own evidence, and closes.
			failing.Store(true)
			allOpen(t, pods)
			failing.Store(false)
			servedAgain(t, pods, time.Now())
			if !versionInRange(t, f) {
				t.Errorf("Redis holds version %q after a round, want an integer in [0, 2^53)", f.do(t, "HGET", f.state, "v"))
			}
		})
	}
}

// versionInRange reports whether Redis holds no state or a state whose
// version is an integer in [0, 2^53).
func versionInRange(t *testing.T, f foreign) bool {
	t.Helper()
	v, err := f.srv.Do("HGET", f.state, "v")
	if err != nil {
		return false // not a hash
	}
	if v == "" {
		return true
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	return perr == nil && n >= 0 && n < 1<<53
}

// TestGarbageInTheWindowDoesNotStopTheFleetOpening: another client writes
// fields no pod writes into the fleet's window (names that are not
// r<bucket> or f<bucket>, counts that are not numbers or negative, a
// bucket in the future, more failures than requests), with no expiry.
// They are deleted and counted, and 10 pods that each see 3 failures,
// too few for their own breakers, still open the fleet on their evidence.
func TestGarbageInTheWindowDoesNotStopTheFleetOpening(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	f := newForeign(srv, "garbage")
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	pods := startPods(t, 10, srv, "garbage", "fleet", up.URL, map[string]string{
		"PAYMENTS_BREAKER_MIN_REQUESTS": "20", "PAYMENTS_BREAKER_WINDOW": "60s"})
	bucket := ms(time.Now()) / (60 * time.Second / 10).Milliseconds() // BREAKER_WINDOW 60s: buckets of 6s
	b := func(d int64) string { return strconv.FormatInt(bucket+d, 10) }
	garbage := []string{"rabc", "1", "r" + b(0), "many", "f" + b(-1), "-5", "r" + b(1000), "1000000",
		"x" + b(0), "3", "r", "2", "f" + b(-2), "10", "r" + b(-2), "1", "r" + b(-3), "1e400"}
	f.do(t, append([]string{"HSET", f.base + ":win:0"}, garbage...)...)
	for _, p := range pods {
		for range 3 {
			get(context.Background(), p.c)
		}
	}
	for _, p := range pods {
		waitFor(t, syncWait, "fleet open", func() bool { return p.c.Status().Breaker == observe.BreakerOpen })
	}
	var rejected uint64
	for _, p := range pods {
		rejected += p.fleet.Sync().Malformed
	}
	if rejected < 8 {
		t.Errorf("%d values rejected across the pods, want >= 8 (one per garbage field)", rejected)
	}
	if left := f.do(t, "EXISTS", f.base+":win:0"); left != "0" {
		t.Errorf("the window of version 0 is still there (%s): the trip deletes it", left)
	}
}

// TestForgedLeaseLastsNoLongerThanALease: another client takes the probe
// leases of the fleet's open version for good (no expiry) or for 10^12
// ms. The pods cut them to their own lease life (min(CALL_TIMEOUT,
// BREAKER_OPEN_TIMEOUT) + CALL_TIMEOUT: 3s here), as if a pod had died
// holding them, and serve again once they expire.
func TestForgedLeaseLastsNoLongerThanALease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	f := newForeign(srv, "lease")
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	pods := startPods(t, 3, srv, "lease", "fleet", up.URL, map[string]string{
		"PAYMENTS_BREAKER_OPEN_TIMEOUT": "1s", "PAYMENTS_BREAKER_HALF_OPEN_PROBES": "2",
		"PAYMENTS_CONNECT_TIMEOUT": "200ms", "PAYMENTS_TLS_HANDSHAKE_TIMEOUT": "300ms", "PAYMENTS_READ_TIMEOUT": "500ms",
		"PAYMENTS_CALL_TIMEOUT": "2s",
	})
	f.do(t, "SET", f.base+":probe:7:1", "forged")
	f.do(t, "SET", f.base+":probe:7:2", "forged", "PX", "1000000000000")
	f.do(t, "HSET", f.state, "v", "7", "s", "1", "u", strconv.FormatInt(ms(time.Now())+500, 10))
	stopped := time.Now()
	allOpen(t, pods)
	const leaseLife = 3 * time.Second
	waitFor(t, syncWait, "the forged leases cut", func() bool {
		for _, p := range pods {
			get(context.Background(), p.c) // half-open: the pods ask for leases
		}
		time.Sleep(10 * time.Millisecond)
		for _, i := range []string{"1", "2"} {
			ttl, err := strconv.Atoi(f.do(t, "PTTL", f.base+":probe:7:"+i))
			if err != nil || ttl < 0 || ttl > int(leaseLife.Milliseconds()) {
				return false
			}
		}
		return true
	})
	d := servedAgain(t, pods, stopped)
	var rejected uint64
	for _, p := range pods {
		rejected += p.fleet.Sync().Malformed
	}
	t.Logf("leases forged for good: every pod served again %v after the writes (lease life %v); %d values rejected", d.Round(time.Millisecond), leaseLife, rejected)
	if rejected < 2 {
		t.Errorf("%d values rejected, want >= 2 (the two forged leases)", rejected)
	}
}
