package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// TestBreakerCommandForcesAPodsBreaker checks `outbound breaker` against a
// pod's controls: forced open, then released; usage errors exit 2 and a
// refusal of the pod exits 1.
func TestBreakerCommandForcesAPodsBreaker(t *testing.T) {
	reg := registrytest.New(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": "http://127.0.0.1:1"})
	pod := httptest.NewServer(statuspage.Controls(reg))
	defer pod.Close()
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"breaker"}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := run("inv", "open", "--for", "10m", "--pod", pod.URL); code != 0 || !strings.Contains(out, `"forced":{"state":"open"`) {
		t.Fatalf("open: %d %s", code, out)
	}
	if st := reg.MustClient("inv").Status(); st.Forced == nil {
		t.Fatal("the pod's breaker is not forced")
	}
	if code, out := run("inv", "auto", "--pod", pod.URL); code != 0 || reg.MustClient("inv").Status().Forced != nil {
		t.Fatalf("auto: %d %s", code, out)
	}
	if code, out := run("nope", "open", "--pod", pod.URL); code != 1 || !strings.Contains(out, "404") {
		t.Errorf("unknown system: %d %s", code, out)
	}
	for _, args := range [][]string{{"inv", "shut", "--pod", pod.URL}, {"inv"}} {
		if code, out := run(args...); code != 2 {
			t.Errorf("%v: %d %s, want usage", args, code, out)
		}
	}
}

// TestBreakerCommandWithoutPodForcesEveryPod checks `outbound breaker`
// without --pod: the override goes through the fleet's Redis named by
// OUTBOUND_FLEET_*, and two pods at BREAKER_SCOPE=fleet both refuse, then
// both serve again once it is released.
func TestBreakerCommandWithoutPodForcesEveryPod(t *testing.T) {
	srv := redistest.Start(t)
	t.Setenv(config.FleetRedisURLVar, srv.URL())
	t.Setenv(config.FleetNamespaceVar, "shop")
	env := map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": "http://127.0.0.1:1", "INV_BREAKER_SCOPE": "fleet",
		config.FleetRedisURLVar: srv.URL(), config.FleetNamespaceVar: "shop"}
	var pods []*registry.Client
	for range 2 {
		f, err := fleet.New(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: "shop"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		pods = append(pods, registrytest.New(t, env, registrytest.With(f.Option())).MustClient("inv"))
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"breaker"}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	everyPod := func(forced bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second) // one message, or a read each second
		for _, c := range pods {
			for (c.Status().Forced != nil) != forced {
				if time.Now().After(deadline) {
					t.Fatalf("a pod's breaker forced=%v, want %v", !forced, forced)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	if code, out := run("inv", "open", "--for", "10m"); code != 0 || !strings.Contains(out, "inv: breaker forced open on every pod of shop until") {
		t.Fatalf("open: %d %s", code, out)
	}
	everyPod(true)
	req := httptest.NewRequest("GET", "http://127.0.0.1:1/", nil).WithContext(context.Background())
	req.RequestURI = ""
	if resp, err := pods[1].Do(req); !errors.Is(err, registry.ErrCircuitOpen) {
		if err == nil {
			resp.Body.Close()
		}
		t.Errorf("a call on the other pod: %v, want ErrCircuitOpen", err)
	}
	if code, out := run("inv", "auto"); code != 0 || !strings.Contains(out, "released") {
		t.Fatalf("auto: %d %s", code, out)
	}
	everyPod(false)
	if code, out := run("inv", "open", "--for", "25h"); code != 1 || !strings.Contains(out, "24h") {
		t.Errorf("an override past a day: %d %s, want refused", code, out)
	}
}

// TestBreakerCommandNeedsAPodOrAFleet checks that without --pod and
// without OUTBOUND_FLEET_REDIS_URL the command says what to give it.
func TestBreakerCommandNeedsAPodOrAFleet(t *testing.T) {
	t.Setenv(config.FleetRedisURLVar, "")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"breaker", "inv", "open"}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "--pod") || !strings.Contains(errb.String(), config.FleetRedisURLVar) {
		t.Errorf("%d %q, want usage naming --pod and %s", code, errb.String(), config.FleetRedisURLVar)
	}
}
