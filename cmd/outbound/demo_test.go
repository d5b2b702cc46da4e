package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

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

// demoEnv keeps the caller's environment out of the demo's systems.
func demoEnv(t *testing.T, kv ...string) {
	t.Helper()
	saved := testSystems
	testSystems = append([]string{"catalog", "shipping"}, saved...)
	defer func() { testSystems = saved }()
	cleanEnv(t, kv...)
}

func TestDemo(t *testing.T) {
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
	go func() {
		done <- run(ctx, []string{"demo", "--duration", "3s", "--plain", "--status-addr", busy.Addr().String()}, &out, &errb)
	}()

	// The status page answers while the demo runs.
	statusRE := regexp.MustCompile(`status page .*: (http://127\.0\.0\.1:\d+/)`)
	var statusURL string
	for deadline := time.Now().Add(10 * time.Second); statusURL == "" && time.Now().Before(deadline); {
		if m := statusRE.FindStringSubmatch(out.String()); m != nil {
			statusURL = m[1]
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if statusURL == "" {
		t.Fatalf("no status URL in the output:\n%s", out.String())
	}
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
	summary := got[strings.Index(got, "Summary after"):]
	for _, sys := range demoOrder {
		if !strings.Contains(summary, "\n"+sys+" (") {
			t.Errorf("the summary does not describe %s:\n%s", sys, summary)
		}
	}
	for _, want := range []string{
		"the breaker of shipping opened",
		"What tripped:", "What was shed:", "What stayed fast:",
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

// checkProbes checks that the demo prints the URLs of /metrics, /healthz
// and /readyz beside the status page's, and serves them on the same
// server (issue 10 item 16): Prometheus text with outbound's series, and
// the two probes' JSON.
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
	if len(page.Systems) != len(demoOrder) {
		t.Errorf("status page lists %d systems, want %d", len(page.Systems), len(demoOrder))
	}
}

func TestDemoUsage(t *testing.T) {
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
		code, _, stderr := runOut(t, append([]string{"demo"}, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("demo %q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	if code, stdout, _ := runOut(t, "help", "demo"); code != exitOK || !strings.Contains(stdout, "--status-addr") {
		t.Errorf("help demo: exit %d, %q", code, stdout)
	}
}

func TestDemoBadEnvironment(t *testing.T) {
	demoEnv(t, "SHIPPING_READ_TIMEOUT", "abc", "PAYMENTS_CALL_TIMEOUT", "1s")
	code, _, stderr := runOut(t, "demo", "--duration", "1s", "--status-addr", "")
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"SHIPPING_READ_TIMEOUT=abc", "PAYMENTS_CALL_TIMEOUT=1s", "2 problems"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestDemoServeFakesOnly(t *testing.T) {
	demoEnv(t)
	code, stdout, stderr := runOut(t, "demo", "--duration", "300ms", "--workers", "0", "--status-addr", "")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "No calls were made") || strings.Contains(stdout, "status page") {
		t.Errorf("output:\n%s", stdout)
	}
}

func TestHist(t *testing.T) {
	var h hist
	if h.quantile(0.5) != 0 {
		t.Error("empty histogram has a median")
	}
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		got := h.quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.1 {
			t.Errorf("quantile(%v) = %v, want %v within 10%% above", c.q, got, c.want)
		}
	}
	h.add(0)
	h.add(time.Hour) // clamped into the last bucket
	if h.n != 102 {
		t.Errorf("n = %d, want 102", h.n)
	}
}

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8089": true, "localhost:0": true, "[::1]:80": true, "127.1.2.3:9": true,
		":8089": false, "0.0.0.0:1": false, "10.0.0.1:80": false, "example.com:80": false, "nonsense": false,
	} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}
