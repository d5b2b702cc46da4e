package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// TestHelperRedisDownPod is a pod whose Redis is down for 3s, its log
// (reminders every second) in JSON on the standard output. It runs in a
// process of its own, for TestRedisDownIsLoggedOncePerChange.
func TestHelperRedisDownPod(t *testing.T) {
	if os.Getenv("FLEET_HELPER_POD") != "1" {
		t.Skip("run by TestRedisDownIsLoggedOncePerChange")
	}
	srv := redistest.Start(t)
	f, err := New(context.Background(), Config{RedisURL: srv.URL(), Namespace: "log", FlushInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(os.Stdout, nil)), remindEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.add(testSettings, testLocal(testSettings), testReports); err != nil {
		t.Fatal(err)
	}
	waitFor(t, syncWait, "in sync", f.synced.Load)
	srv.Kill()
	time.Sleep(3 * time.Second)
	srv.Restart()
	waitFor(t, syncWait, "in sync again", f.synced.Load)
}

// TestRedisDownIsLoggedOncePerChange: Redis down for 3s under a pod that
// talks to it 20 times a second. Nothing reaches the process's standard
// error (go-redis prints each failed dial there unless kept from it); the
// fleet's logger is told once that sync was lost, with the cause, once a
// second (the reminder of the test) that it still is, and once that it
// is back.
func TestRedisDownIsLoggedOncePerChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperRedisDownPod$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FLEET_HELPER_POD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the pod: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		lines := strings.Split(s, "\n")
		t.Errorf("%d lines on the standard error with Redis down 3s, want none; first: %q", len(lines), lines[0])
	}
	// Each change of sync is told once: lost, reminders while it lasts,
	// back. A machine under load may add a short episode before the kill.
	var seq []string
	dialed := false // a reminder names the refused dial
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var rec struct{ Level, Msg, Error string }
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue // the test's own output (PASS)
		}
		t.Logf("%s %s %s", rec.Level, rec.Msg, rec.Error)
		switch {
		case strings.HasPrefix(rec.Msg, "fleet: out of sync"):
			seq = append(seq, "lost")
		case strings.HasPrefix(rec.Msg, "fleet: still out of sync"):
			seq = append(seq, "still")
			dialed = dialed || strings.Contains(rec.Error, "dial tcp")
		case strings.HasPrefix(rec.Msg, "fleet: in sync"):
			seq = append(seq, "back")
		default:
			t.Errorf("a record %q", rec.Msg)
		}
		if strings.Contains(rec.Msg, "out of sync") && rec.Error == "" {
			t.Errorf("the record %q gives no cause", rec.Msg)
		}
	}
	lost, state, still, longest := 0, "back", 0, 0
	for _, r := range seq {
		switch {
		case r == "lost" && state == "back":
			lost, still = lost+1, 0
		case r == "still" && state != "back":
			still++
			longest = max(longest, still)
			continue
		case r == "back" && state != "back":
		default:
			t.Fatalf("records %v: %s after %s, want each change once", seq, r, state)
		}
		state = r
	}
	if !dialed {
		t.Errorf("no reminder gives the refused dial (dial tcp ...) as the cause")
	}
	if lost < 1 || state != "back" || longest < 1 || longest > 4 {
		t.Errorf("records %v; want sync lost and back, and a reminder a second while lost (3s: 1 to 4)", seq)
	}
}
