package fleetdemo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPodsTripTogetherInTheFirstStorm: three pods on a redis-server of
// the demo's own open their payments breakers together in the fake's
// first storm, every pod synced. A pod may show local in one report of
// the run: on a loaded machine a Redis round trip can miss the fleet's
// 100ms Timeout, and the pod runs local until its next one succeeds; a
// pod that does not sync shows local in every report.
func TestPodsTripTogetherInTheFirstStorm(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := "redis-server not installed (apt-get install redis-server): outbound demo --fleet needs one"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), Options{Duration: 7 * time.Second}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	if !strings.Contains(got, ">> t=") || !strings.Contains(got, "every pod open within") {
		t.Errorf("no trip of the whole fleet in the first storm:\n%s", got)
	}
	for pod := 1; pod <= 3; pod++ {
		local := regexp.MustCompile(fmt.Sprintf(`pod-%d \S+ +local `, pod))
		if n := len(local.FindAllString(got, -1)); n > 1 {
			t.Errorf("pod-%d ran local (out of sync) with Redis up in %d reports:\n%s", pod, n, got)
		}
	}
}

// TestWithoutRedisSaysHowToGetIt: with no redis-server on the PATH, the
// fleet demo fails at once and says how to install one.
func TestWithoutRedisSaysHowToGetIt(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var out bytes.Buffer
	err := Run(context.Background(), Options{Duration: time.Second}, &out)
	if !errors.Is(err, errNoRedis) || !strings.Contains(err.Error(), "apt-get install redis-server") || out.Len() > 0 {
		t.Errorf("Run = %v, output %q: want how to install redis-server, nothing written", err, out.String())
	}
}
