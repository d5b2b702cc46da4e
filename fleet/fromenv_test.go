package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// TestFromEnvWithoutRedis: no OUTBOUND_FLEET_REDIS_URL, no fleet: a nil
// *Fleet whose Option installs nothing and whose Close does nothing, and a
// registry with a system at scope fleet refuses to build.
func TestFromEnvWithoutRedis(t *testing.T) {
	t.Setenv("OUTBOUND_FLEET_REDIS_URL", "")
	f, err := fleet.FromEnv(context.Background())
	if f != nil || err != nil {
		t.Fatalf("FromEnv = %v, %v; want nil, nil", f, err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close of a nil fleet: %v", err)
	}
	loaded, err := config.LoadEnv(map[string]string{"PAY_BASE_URL": "http://127.0.0.1:1", "PAY_BREAKER_SCOPE": "fleet",
		"OUTBOUND_FLEET_REDIS_URL": "redis://127.0.0.1:1", "OUTBOUND_FLEET_NAMESPACE": "t"}, config.System{Name: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := registry.New(loaded, f.Option()); err == nil || !strings.Contains(err.Error(), "PAY_BREAKER_SCOPE=fleet") {
		if r != nil {
			r.Close()
		}
		t.Errorf("registry with scope fleet and a nil fleet: %v", err)
	}
}

// TestNewRefusesBadSettings: New checks its settings with config's rules,
// and never shows the password.
func TestNewRefusesBadSettings(t *testing.T) {
	t.Parallel()
	for _, cfg := range []fleet.Config{
		{RedisURL: "", Namespace: "a"},
		{RedisURL: "http://:hunter2@redis:6379", Namespace: "a"},
		{RedisURL: "redis://:hunter2@redis:6379"},
	} {
		f, err := fleet.New(context.Background(), cfg)
		if err == nil {
			f.Close()
			t.Errorf("New(%s): no error", config.Fleet{RedisURL: cfg.RedisURL, Namespace: cfg.Namespace})
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
		var cerr *config.Error
		if cfg.RedisURL != "" && !errors.As(err, &cerr) {
			t.Errorf("error %v is not a *config.Error", err)
		}
	}
}

// TestStartWithRedisDown: a Redis that does not answer at start is no
// error: the pod starts local, calls go through, and it syncs once Redis
// answers.
func TestStartWithRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.Kill()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	pods := startPodsNoWait(t, srv, up.URL)
	p := pods[0]
	if s := p.fleet.Sync(); s.Synced {
		t.Fatalf("in sync with Redis down: %+v", s)
	}
	if err := get(context.Background(), p.c); err != nil {
		t.Fatalf("a call with Redis down at start: %v", err)
	}
	if st := p.c.Status(); st.Fleet == nil || st.Fleet.Synced || st.Fleet.LastError == "" {
		t.Errorf("Status().Fleet = %+v, want degraded with the error", st.Fleet)
	}
	srv.Restart()
	d := waitFor(t, syncWait, "in sync once Redis answers", func() bool { return p.fleet.Sync().Synced })
	t.Logf("in sync %v after Redis started", d)
}

// startPodsNoWait is one pod at scope fleet, not waiting for sync.
func startPodsNoWait(t *testing.T, srv *redistest.Server, baseURL string) []*pod {
	t.Helper()
	f, err := fleet.New(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: "down"})
	if err != nil {
		t.Fatalf("New with Redis down: %v, want no error", err)
	}
	t.Cleanup(func() { f.Close() })
	reg := registrytest.New(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": baseURL, "PAYMENTS_BREAKER_SCOPE": "fleet",
		"OUTBOUND_FLEET_REDIS_URL": srv.URL(), "OUTBOUND_FLEET_NAMESPACE": "down",
	}, registrytest.With(f.Option()))
	return []*pod{{reg: reg, fleet: f, c: reg.MustClient("payments")}}
}

// TestFromEnvWithLogger: the logger given to FromEnv is told when the
// fleet cannot reach its Redis, with the cause and the password hidden.
func TestFromEnvWithLogger(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	var buf syncBuffer
	t.Setenv("OUTBOUND_FLEET_REDIS_URL", "redis://:hunter2@"+srv.Addr())
	t.Setenv("OUTBOUND_FLEET_NAMESPACE", "logged")
	f, err := fleet.FromEnv(context.Background(), fleet.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	registrytest.New(t, map[string]string{ // a system at scope fleet: the fleet talks to Redis
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": "http://127.0.0.1:1", "PAYMENTS_BREAKER_SCOPE": "fleet",
		"OUTBOUND_FLEET_REDIS_URL": srv.URL(), "OUTBOUND_FLEET_NAMESPACE": "logged",
	}, registrytest.With(f.Option()))
	waitFor(t, syncWait, "a record", func() bool { return strings.Contains(buf.String(), "out of sync") })
	// The cause: the dial to Redis's address refused, or, on a starved
	// machine, the round trip's time up before the dial was done.
	s := buf.String()
	if !strings.Contains(s, "dial tcp "+srv.Addr()) && !strings.Contains(s, `error="context deadline exceeded"`) || strings.Contains(s, "hunter2") {
		t.Errorf("the log: %s; want the cause (the dial to %s, or the round trip's time up), and no password", s, srv.Addr())
	}
}

// syncBuffer is a bytes.Buffer for a logger written from the fleet's
// goroutines while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestFleetLogsThroughTheRegistrysLogger: a fleet built without a logger
// serves a registry built with one. The fleet's Redis lost and back are
// told in the registry's logger, once each, with the cause; so is a Redis already down when the registry is
// built.
func TestFleetLogsThroughTheRegistrysLogger(t *testing.T) {
	t.Parallel()
	for _, downFirst := range []bool{false, true} {
		name := map[bool]string{false: "lost-while-serving", true: "down-before-the-registry"}[downFirst]
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			url := srv.URL()
			f, err := fleet.New(context.Background(), fleet.Config{RedisURL: url, Namespace: "onelog"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if downFirst {
				srv.Kill()
				waitFor(t, syncWait, "Redis's loss seen", func() bool { return f.Sync().LastError != "" })
			}
			var buf syncBuffer
			registrytest.New(t, map[string]string{
				"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": "http://127.0.0.1:1", "PAYMENTS_BREAKER_SCOPE": "fleet",
				"OUTBOUND_FLEET_REDIS_URL": url, "OUTBOUND_FLEET_NAMESPACE": "onelog",
			}, registrytest.With(f.Option(), registry.WithLogger(slog.New(slog.NewTextHandler(&buf, nil)))))
			if !downFirst {
				waitFor(t, syncWait, "in sync", func() bool { return f.Sync().Synced })
				srv.Kill()
			}
			waitFor(t, syncWait, "the loss in the registry's log", func() bool { return strings.Contains(buf.String(), "out of sync") })
			srv.Restart()
			waitFor(t, syncWait, "the return in the registry's log", func() bool {
				lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
				return strings.Contains(lines[len(lines)-1], "in sync with Redis again")
			})
			s := buf.String()
			t.Logf("the registry's log:\n%s", s)
			// Each change once: lost (with its cause), back, and so on (a
			// busy machine may add a short episode of its own).
			state := "back"
			for line := range strings.Lines(s) {
				switch {
				case strings.Contains(line, "fleet: out of sync") && state == "back" && strings.Contains(line, "error="):
					state = "lost"
				case strings.Contains(line, "fleet: in sync with Redis again") && state == "lost":
					state = "back"
				default:
					t.Errorf("a record %q after the fleet was %s; want each change once, a loss with its cause", line, state)
				}
			}
			if state != "back" {
				t.Errorf("the registry's log ends with the fleet %s, want back", state)
			}
		})
	}
}
