package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
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
	if code, out := run("inv", "open", "--for", "10m", "--pod", pod.URL); code != 0 || !strings.HasPrefix(out, "inv: breaker forced open on "+pod.URL+" until ") {
		t.Fatalf("open: %d %s", code, out)
	}
	if st := reg.MustClient("inv").Status(); st.Forced == nil {
		t.Fatal("the pod's breaker is not forced")
	}
	if code, out := run("inv", "auto", "--pod", pod.URL); code != 0 || reg.MustClient("inv").Status().Forced != nil ||
		out != "inv: breaker released to its own judgement on "+pod.URL+", now closed\n" {
		t.Fatalf("auto: %d %q", code, out)
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

// runBreakerCmd runs `outbound breaker args...` and returns the exit
// code, stdout and stderr.
func runBreakerCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"breaker"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestBreakerCommandPrintsOneEscapedLine checks what `outbound breaker
// --pod` prints of a pod's answer: one line, whatever the size of the
// status, and no control character of the pod's reaches the terminal,
// on success or on a refusal.
func TestBreakerCommandPrintsOneEscapedLine(t *testing.T) {
	hostile := "\x1b]0;owned\x07\x1b[2J\u202e\r\nfake: breaker released"
	var answer atomic.Int32
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answer.Load() == 0 {
			st := observe.Status{System: "inv", Breaker: observe.BreakerState(hostile), Config: make([]config.Var, 200)}
			if r.URL.Query().Get("state") == "open" {
				st.Forced = &observe.Forced{State: observe.BreakerOpen, Until: time.Now().Add(time.Minute)}
			}
			_ = json.NewEncoder(w).Encode(st)
			return
		}
		http.Error(w, hostile+strings.Repeat("x", 4000), http.StatusForbidden)
	}))
	defer pod.Close()
	clean := func(name, s string) {
		t.Helper()
		if strings.ContainsAny(s, "\x1b\x07\r\u202e") || strings.Count(s, "\n") > 1 || len(s) > 400 {
			t.Errorf("%s: %d bytes %q, want one line without control characters", name, len(s), s)
		}
	}
	code, out, errb := runBreakerCmd("inv", "open", "--pod", pod.URL)
	clean("open", out)
	if code != 0 || !strings.HasPrefix(out, "inv: breaker forced open on "+pod.URL+" until ") || errb != "" {
		t.Errorf("open: %d %q %q", code, out, errb)
	}
	code, out, _ = runBreakerCmd("inv", "auto", "--pod", pod.URL)
	clean("auto", out)
	if code != 0 || !strings.Contains(out, `\x1b]0;owned\a`) {
		t.Errorf("auto: %d %q, want the state escaped", code, out)
	}
	answer.Store(1)
	code, out, errb = runBreakerCmd("inv", "open", "--pod", pod.URL)
	clean("refused", errb)
	if code != 1 || out != "" || !strings.Contains(errb, "403") || !strings.Contains(errb, "bytes)") {
		t.Errorf("refused: %d %q %q, want exit 1 with the cut answer", code, out, errb)
	}
}

// TestBreakerCommandFollowsNoRedirect checks that a pod answering with a
// redirect gets no second POST sent anywhere: the command fails and says
// where it was sent.
func TestBreakerCommandFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer pod.Close()
	code, out, errb := runBreakerCmd("inv", "open", "--pod", pod.URL)
	if code != 1 || out != "" || !strings.Contains(errb, "307") || !strings.Contains(errb, "not followed") {
		t.Errorf("%d %q %q, want exit 1 naming the redirect", code, out, errb)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests, want 0", n)
	}
}

// TestBreakerCommandSendsTheControlsToken checks that the command
// passes controls that need a token when it has the token, from --token
// or from the variable, and is refused without it.
func TestBreakerCommandSendsTheControlsToken(t *testing.T) {
	reg := registrytest.New(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": "http://127.0.0.1:1"})
	pod := httptest.NewServer(statuspage.Controls(reg, statuspage.WithToken("s3cret")))
	defer pod.Close()
	t.Setenv(statuspage.TokenVar, "")
	if code, _, errb := runBreakerCmd("inv", "open", "--pod", pod.URL); code != 1 || !strings.Contains(errb, "401") {
		t.Errorf("without the token: %d %q, want 401", code, errb)
	}
	if code, out, errb := runBreakerCmd("inv", "open", "--pod", pod.URL, "--token", "s3cret"); code != 0 || reg.MustClient("inv").Status().Forced == nil {
		t.Errorf("--token: %d %q %q", code, out, errb)
	}
	t.Setenv(statuspage.TokenVar, "s3cret")
	if code, out, errb := runBreakerCmd("inv", "auto", "--pod", pod.URL); code != 0 || reg.MustClient("inv").Status().Forced != nil {
		t.Errorf("%s: %d %q %q", statuspage.TokenVar, code, out, errb)
	}
}
