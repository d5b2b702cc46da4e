package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDemoFleet (issue #13): three pods on a redis-server of the demo's
// own trip together in the fake's first storm.
func TestDemoFleet(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := "redis-server not installed (apt-get install redis-server): outbound demo --fleet needs one"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cleanEnv(t)
	code, out, errOut := runOut(t, "demo", "--fleet", "--duration", "7s", "--status-addr", "")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, ">> t=") || !strings.Contains(out, "every pod open within") {
		t.Errorf("no trip of the whole fleet in the first storm:\n%s", out)
	}
	if strings.Contains(out, " local ") {
		t.Errorf("a pod ran local (out of sync) with Redis up:\n%s", out)
	}
}

// TestDemoFleetWithoutRedis: with no redis-server, the demo says how to
// get one.
func TestDemoFleetWithoutRedis(t *testing.T) {
	cleanEnv(t)
	t.Setenv("PATH", t.TempDir())
	code, _, errOut := runOut(t, "demo", "--fleet", "--duration", "1s", "--status-addr", "")
	if code != exitInvalid || !strings.Contains(errOut, "apt-get install redis-server") {
		t.Errorf("exit %d, stderr %q: want %d and how to install redis-server", code, errOut, exitInvalid)
	}
}
