package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/cmd/outbound/internal/fakes"
	"github.com/outbound-go/outbound/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a bytes.Buffer safe for the demo writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// demoEnv unsets, for the duration of t, every OUTBOUND_* variable and
// every variable under a prefix of the demo's systems, so that the
// caller's environment cannot change the results, then sets kv
// (alternating names and values).
func demoEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		if strings.HasPrefix(k, "OUTBOUND_") || slices.ContainsFunc(fakes.Names(), func(s string) bool {
			return strings.HasPrefix(k, config.Prefix(s)+"_")
		}) {
			t.Setenv(k, "") // restores the old value after the test
			os.Unsetenv(k)
		}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

// runOut runs the demo with args and returns its exit code and output.
func runOut(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestRunDrivesTheFakesAndExplainsWhatHappened runs the demo as a user
// would, with a BASE_URL and a tuning variable in the environment and the
// status port taken, and checks the status page, the probes, the metrics
// and the summary.
func TestRunDrivesTheFakesAndExplainsWhatHappened(t *testing.T) {
	// A BASE_URL in the environment must not send the demo anywhere but
	// its own fakes; other variables tune it.
	demoEnv(t, "CATALOG_BASE_URL", "http://catalog.invalid", "INVENTORY_MAX_CONCURRENT", "8")
	// The default status port may be taken: take one and check the demo
	// falls back to a free port instead of failing.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	var out, errb syncBuffer
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The status page and the probes are checked while the demo runs:
	// 6s leaves a loaded machine time for them (3s did not, once).
	go func() {
		done <- Run(ctx, []string{"--duration", "6s", "--plain", "--status-addr", busy.Addr().String()}, &out, &errb)
	}()

	// The status page answers while the demo runs.
	statusURL := waitForStatusURL(t, &out)
	if strings.Contains(statusURL, busy.Addr().String()) {
		t.Errorf("status page on the busy address %s", statusURL)
	}
	checkStatus(t, statusURL)
	checkProbes(t, out.String(), statusURL)

	var code int
	select {
	case code = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("the demo did not stop by itself")
	}
	got := out.String()
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s\nstdout:\n%s", code, errb.String(), got)
	}
	checkSummary(t, got)
	for _, want := range []string{
		"the breaker of shipping opened",
		"What tripped:", "What was shed:", "What stayed fast:",
		"refused with no I/O (", " breaker_open", "sent nothing and is left out of the ok rate",
		"ignoring CATALOG_BASE_URL from the environment",
		"using INVENTORY_MAX_CONCURRENT=8 from the environment",
		"is busy: the status page took a free port",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "catalog.invalid") {
		t.Errorf("the demo used the environment's CATALOG_BASE_URL:\n%s", got)
	}
	if strings.Contains(got, "\x1b[") {
		t.Error("--plain output has ANSI sequences")
	}
}

// waitForStatusURL returns the status page's URL once the demo has
// printed it.
func waitForStatusURL(t *testing.T, out *syncBuffer) string {
	t.Helper()
	statusRE := regexp.MustCompile(`status page .*: (http://127\.0\.0\.1:\d+/)`)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := statusRE.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no status URL in the output:\n%s", out.String())
	return ""
}

// checkSummary checks that the summary describes every system.
func checkSummary(t *testing.T, got string) {
	t.Helper()
	i := strings.Index(got, "Summary after")
	if i < 0 {
		t.Fatalf("no summary:\n%s", got)
	}
	for _, sys := range fakes.Names() {
		if !strings.Contains(got[i:], "\n"+sys+" (") {
			t.Errorf("the summary does not describe %s:\n%s", sys, got[i:])
		}
	}
}

// checkProbes checks that the demo prints the URLs of /metrics, /healthz
// and /readyz beside the status page's, and serves them on the same
// server: Prometheus text with outbound's series, and the two probes'
// JSON.
func checkProbes(t *testing.T, out, url string) {
	t.Helper()
	for _, p := range []string{"metrics", "healthz", "readyz"} {
		if !strings.Contains(out, url+p) {
			t.Errorf("the output does not print %s%s:\n%s", url, p, out)
		}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, c := range []struct{ path, want string }{
		{"metrics", "outbound_attempt_duration_seconds"},
		{"healthz", `"ok"`},
		{"readyz", `"systems"`},
	} {
		var body string
		// The metrics appear with the first calls: poll a little.
		for deadline := time.Now().Add(5 * time.Second); ; {
			resp, err := client.Get(url + c.path)
			if err != nil {
				t.Fatalf("%s: %v", c.path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if resp.StatusCode/100 == 2 && strings.Contains(body, c.want) || time.Now().After(deadline) {
				if !strings.Contains(body, c.want) {
					t.Errorf("GET %s: %d, body lacks %q:\n%.300s", c.path, resp.StatusCode, c.want, body)
				}
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// checkStatus fetches the status page and its status.json, which must
// list every system.
func checkStatus(t *testing.T, url string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	html, err := client.Get(url)
	if err != nil {
		t.Fatalf("status page: %v", err)
	}
	html.Body.Close()
	if html.StatusCode != http.StatusOK || !strings.HasPrefix(html.Header.Get("Content-Type"), "text/html") {
		t.Errorf("status page: %d %s, want 200 HTML", html.StatusCode, html.Header.Get("Content-Type"))
	}
	resp, err := client.Get(url + "status.json")
	if err != nil {
		t.Fatalf("status.json: %v", err)
	}
	defer resp.Body.Close()
	var page struct {
		Systems []struct{ System string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatalf("status page: %v", err)
	}
	if len(page.Systems) != len(fakes.Names()) {
		t.Errorf("status page lists %d systems, want %d", len(page.Systems), len(fakes.Names()))
	}
}

func TestBadFlagsAreUsageErrors(t *testing.T) {
	demoEnv(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "0s"}, "--duration must be > 0"},
		{[]string{"--workers", "-1"}, "--workers must be 0..1024"},
		{[]string{"--status-addr", "0.0.0.0:8089"}, "not a loopback address"},
		{[]string{"--status-addr", ":8089"}, "not a loopback address"},
		{[]string{"--status-addr", "192.168.1.10:80"}, "not a loopback address"},
		{[]string{"extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		code, _, stderr := runOut(t, tt.args...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("demo %q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	if code, _, stderr := runOut(t, "-h"); code != exitOK || !strings.Contains(stderr, "--status-addr") {
		t.Errorf("-h: exit %d, %q; want 0 and the flags", code, stderr)
	}
}

// TestEnvironmentProblemsOfItsSystemsStopTheDemo: a variable that tunes
// one of the demo's systems badly stops it at once, every problem named.
func TestEnvironmentProblemsOfItsSystemsStopTheDemo(t *testing.T) {
	demoEnv(t, "SHIPPING_READ_TIMEOUT", "abc", "PAYMENTS_CALL_TIMEOUT", "1s")
	code, _, stderr := runOut(t, "--duration", "1s", "--status-addr", "")
	if code != exitFailed {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"SHIPPING_READ_TIMEOUT=abc", "PAYMENTS_CALL_TIMEOUT=1s", "2 problems"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestZeroWorkersServeTheFakesOnly: --workers 0 serves the fakes for a
// service to call, and makes no call of its own.
func TestZeroWorkersServeTheFakesOnly(t *testing.T) {
	demoEnv(t)
	code, stdout, stderr := runOut(t, "--duration", "300ms", "--workers", "0", "--status-addr", "")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "No calls were made") || strings.Contains(stdout, "status page") {
		t.Errorf("output:\n%s", stdout)
	}
}

// TestFleetWithoutRedisSaysHowToGetIt: --fleet with no redis-server on
// the PATH exits 1 and says how to install one.
func TestFleetWithoutRedisSaysHowToGetIt(t *testing.T) {
	demoEnv(t)
	t.Setenv("PATH", t.TempDir())
	code, _, errOut := runOut(t, "--fleet", "--duration", "1s", "--status-addr", "")
	if code != exitFailed || !strings.Contains(errOut, "outbound demo --fleet: needs redis-server") ||
		!strings.Contains(errOut, "apt-get install redis-server") {
		t.Errorf("exit %d, stderr %q: want %d and how to install redis-server", code, errOut, exitFailed)
	}
}
