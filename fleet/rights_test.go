package fleet_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
)

// leastRightsRules are the ACL rules of the least rights the fleet needs
// on a single Redis, as docs/fleet-redis.md gives them.
var leastRightsRules = []string{"resetkeys", "~outbound:fleet:*", "resetchannels", "&outbound:fleet:*",
	"-@all", "+evalsha", "+eval", "+script|load", "+time", "+@read", "+@write", "+publish", "+subscribe", "+unsubscribe", "+@connection"}

// TestRedisUserWithoutRightsIsNotSynced: the fleet needs to run scripts,
// write keys and publish. A Redis user (ACL) that lacks any of them
// shares no evidence and no state, so the pod shows not synced, with
// Redis's refusal as the cause (the password hidden), and its calls run
// on the local breaker. A user with every right syncs, and so does one
// with the least rights the fleet's guide gives, on its keys and channel
// alone.
func TestRedisUserWithoutRightsIsNotSynced(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	for _, tc := range []struct {
		user  string
		rules []string
		ok    bool
	}{
		{"everything", []string{"+@all"}, true},
		{"least", leastRightsRules, true},
		{"noscripts", []string{"+@all", "-eval", "-evalsha", "-@scripting"}, false},
		{"nopublish", []string{"+@all", "-publish"}, false},
		{"nowrites", []string{"+@all", "-@write", "+publish"}, false},
		{"readonly", []string{"-@all", "+@read", "+@connection", "+subscribe", "+unsubscribe"}, false},
	} {
		t.Run(tc.user, func(t *testing.T) {
			const password = "s3cret-pw"
			args := append([]string{"ACL", "SETUSER", tc.user, "on", ">" + password, "~*", "&*"}, tc.rules...)
			if _, err := srv.Do(args...); err != nil {
				t.Fatal(err)
			}
			url := "redis://" + tc.user + ":" + password + "@" + srv.Addr()
			f, err := fleet.New(context.Background(), fleet.Config{RedisURL: url, Namespace: "rights-" + tc.user})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			reg := registrytest.New(t, map[string]string{
				"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL, "PAYMENTS_BREAKER_SCOPE": "fleet",
				"OUTBOUND_FLEET_REDIS_URL": url, "OUTBOUND_FLEET_NAMESPACE": "rights-" + tc.user,
			}, registrytest.With(f.Option()))
			c := reg.MustClient("payments")
			if tc.ok {
				waitFor(t, syncWait, "in sync", func() bool { return f.Sync().Synced })
				return
			}
			// Ticks and calls, for a second at least and until the fleet
			// says why: never in sync. How many ticks a starved machine
			// runs in that second does not matter; what the fleet says does.
			start := time.Now()
			s := f.Sync()
			for ; time.Since(start) < time.Second || !strings.Contains(s.LastError, "NOPERM"); s = f.Sync() {
				if s.Synced {
					t.Fatalf("user %s: in sync (%+v), want not synced: the fleet shares nothing", tc.user, s)
				}
				if time.Since(start) > syncWait {
					t.Fatalf("user %s: last error %q after %v, want Redis's refusal (NOPERM)", tc.user, s.LastError, syncWait)
				}
				if err := get(context.Background(), c); err != nil {
					t.Fatalf("a call with a Redis user that lacks rights: %v, want the local breaker's pass", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("user %s: %+v", tc.user, s)
			if strings.Contains(s.LastError, password) || strings.Contains(s.Redis, password) {
				t.Errorf("the password shows: %+v", s)
			}
			if st := c.Status(); st.Fleet == nil || st.Fleet.Synced || st.Fleet.LastError != s.LastError {
				t.Errorf("Status().Fleet = %+v, want not synced with the cause", st.Fleet)
			}
		})
	}
}

// TestRightsLostWhileSyncedIsASyncFailure: the pods are in sync when
// their Redis user loses PUBLISH. The next change of state (a pod's own
// breaker trips) fails in Redis: the pod shows not synced with the cause,
// and stays so, its breaker local (open), as long as the right is
// missing; given back, the pod syncs again by itself.
func TestRightsLostWhileSyncedIsASyncFailure(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const user, password = "pods", "s3cret-pw"
	if _, err := srv.Do("ACL", "SETUSER", user, "on", ">"+password, "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	url := "redis://" + user + ":" + password + "@" + srv.Addr()
	f, err := fleet.New(context.Background(), fleet.Config{RedisURL: url, Namespace: "revoked"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	reg := registrytest.New(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL, "PAYMENTS_BREAKER_SCOPE": "fleet",
		"PAYMENTS_BREAKER_MIN_REQUESTS": "5",
		"OUTBOUND_FLEET_REDIS_URL":      url, "OUTBOUND_FLEET_NAMESPACE": "revoked",
	}, registrytest.With(f.Option()))
	c := reg.MustClient("payments")
	waitFor(t, syncWait, "in sync", func() bool { return f.Sync().Synced })
	if _, err := srv.Do("ACL", "SETUSER", user, "-publish"); err != nil {
		t.Fatal(err)
	}
	callUntil(t, c, observe.BreakerOpen) // the local breaker trips; the fleet's trip fails
	waitFor(t, syncWait, "not synced", func() bool { return !f.Sync().Synced })
	time.Sleep(500 * time.Millisecond) // ticks: the check keeps failing
	s := f.Sync()
	if s.Synced || !strings.Contains(s.LastError, "NOPERM") {
		t.Errorf("after PUBLISH was taken: %+v, want not synced with Redis's refusal", s)
	}
	if st := c.Status().Breaker; st != observe.BreakerOpen {
		t.Errorf("breaker %s, want open (the local breaker's)", st)
	}
	if _, err := srv.Do("ACL", "SETUSER", user, "+publish"); err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, syncWait, "in sync again", func() bool { return f.Sync().Synced })
	t.Logf("not synced with %q; in sync %v after PUBLISH came back", s.LastError, d)
}

// TestQuotaIsNotSyncedWhenTheFleetIsNot: a Redis user that may run the
// fleet's scripts but not publish or subscribe (the fleet's channel,
// which carries the pauses and the state) leaves the fleet out of sync.
// The quota at scope fleet says the same: Status().Rate is not synced,
// with Sync's cause, for as long as Sync is not.
func TestQuotaIsNotSyncedWhenTheFleetIsNot(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	for _, tc := range []struct {
		user  string
		rules []string
	}{
		{"quota-nopubsub", []string{"&*", "+@all", "-publish", "-subscribe"}},
		{"quota-nopublish", []string{"&*", "+@all", "-publish"}},
		{"quota-nochannels", []string{"resetchannels", "+@all"}},
	} {
		t.Run(tc.user, func(t *testing.T) {
			const password = "s3cret-pw"
			args := append([]string{"ACL", "SETUSER", tc.user, "on", ">" + password, "~*"}, tc.rules...)
			if _, err := srv.Do(args...); err != nil {
				t.Fatal(err)
			}
			url := "redis://" + tc.user + ":" + password + "@" + srv.Addr()
			f, err := fleet.New(context.Background(), fleet.Config{RedisURL: url, Namespace: tc.user})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			reg := registrytest.New(t, map[string]string{
				"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL,
				"PAYMENTS_RATE_LIMIT": "100/s", "PAYMENTS_RATE_SCOPE": "fleet",
				"OUTBOUND_FLEET_REDIS_URL": url, "OUTBOUND_FLEET_NAMESPACE": tc.user,
			}, registrytest.With(f.Option()))
			c := reg.MustClient("payments")
			waitFor(t, syncWait, "Redis's refusal", func() bool { return strings.Contains(f.Sync().LastError, "NOPERM") })
			if st := c.Status().Rate; st == nil || !strings.Contains(st.LastError, "NOPERM") {
				t.Errorf("user %s: Status().Rate = %+v, want Sync's cause (NOPERM)", tc.user, st)
			}
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				s, st := f.Sync(), c.Status().Rate
				if s.Synced {
					t.Fatalf("user %s: the fleet is in sync (%+v), want not: it cannot use its channel", tc.user, s)
				}
				if st == nil || st.Synced || st.LastError == "" {
					t.Fatalf("user %s: Status().Rate = %+v while Sync() = %+v, want not synced with Sync's cause", tc.user, st, s)
				}
			}
		})
	}
}
