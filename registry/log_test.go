package registry

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// logTestRecords parses the JSON lines of buf.
func logTestRecords(t *testing.T, buf *lockedBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("record %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// logTestGet sends GET path through c and drains and closes the body.
func logTestGet(t *testing.T, c *Client, path string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// TestLoggerScriptedSequence runs a success, a retried call, a call
// refused by a full bulkhead and a 5xx storm that opens the breaker, with
// a JSON slog handler at Debug, and checks the records: one per attempt
// with every field, one per call refused before any attempt, the breaker
// transition at Warn, and never the BASE_URL's userinfo or token.
func TestLoggerScriptedSequence(t *testing.T) {
	t.Parallel()
	flaky := outboundtest.NewScript(testutil.FailN(1, http.StatusServiceUnavailable)...)
	gate := outboundtest.NewHang(outboundtest.Reply{Body: "late"})
	mux := http.NewServeMux()
	mux.HandleFunc("/base/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.Handle("/base/flaky", flaky)
	mux.Handle("/base/gate", gate)
	mux.HandleFunc("/base/down", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	srv := outboundtest.NewUpstream(t, mux)

	const user, pass, token = "alice", "s3cr3tpw", "t0ps3cr3tt0k"
	var buf lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := tbrClient(t, "http://"+user+":"+pass+"@"+srv.Addr()+"/base?token="+token, map[string]string{
		"MAX_CONCURRENT": "1", "RETRIES": "1", "BACKOFF_BASE": "1ms", "BACKOFF_MAX": "2ms",
		"BREAKER_MIN_REQUESTS": "4", "BREAKER_OPEN_TIMEOUT": "1h",
	}, WithLogger(logger))

	// 1. A success.
	if st, err := logTestGet(t, c, "/ok"); err != nil || st != http.StatusOK {
		t.Fatalf("ok: %d, %v", st, err)
	}
	// 2. A 503 retried into a 200.
	if st, err := logTestGet(t, c, "/flaky"); err != nil || st != http.StatusOK {
		t.Fatalf("flaky: %d, %v", st, err)
	}
	// 3. A full bulkhead: one call parked at the gate holds the only
	// permit, the next is refused before any I/O.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	parked := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/gate", nil)
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			err = resp.Body.Close()
		}
		parked <- err
	}()
	if err := gate.WaitFor(ctx, 1); err != nil {
		t.Fatalf("gate: %v", err)
	}
	if _, err := logTestGet(t, c, "/ok"); !errors.Is(err, bulkhead.ErrFull) {
		t.Fatalf("with the permit held: got %v, want bulkhead.ErrFull", err)
	}
	gate.Release()
	if err := <-parked; err != nil {
		t.Fatalf("gated call: %v", err)
	}
	// 4. A 5xx storm opens the breaker; the next call is refused.
	for i := 0; i < 20 && c.Status().Breaker != observe.BreakerOpen; i++ {
		if _, err := logTestGet(t, c, "/down"); err != nil && !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("down: %v", err)
		}
	}
	if c.Status().Breaker != observe.BreakerOpen {
		t.Fatalf("breaker %s after the storm, want open", c.Status().Breaker)
	}
	if _, err := logTestGet(t, c, "/ok"); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("with the breaker open: got %v, want ErrCircuitOpen", err)
	}

	out := buf.String()
	for _, secret := range []string{user, pass, token, "token="} {
		if strings.Contains(out, secret) {
			t.Errorf("the records contain %q:\n%s", secret, out)
		}
	}

	recs := logTestRecords(t, &buf)
	find := func(what string, match func(map[string]any) bool) map[string]any {
		t.Helper()
		for _, m := range recs {
			if match(m) {
				return m
			}
		}
		t.Errorf("no record of %s in:\n%s", what, out)
		return nil
	}
	attempt := func(path string, n int, outcome string) func(map[string]any) bool {
		return func(m map[string]any) bool {
			resends, _ := m["http.request.resend_count"].(float64)
			return m["msg"] == logMsgAttempt && m["url.path"] == path && int(resends)+1 == n && m["outbound.outcome"] == outcome
		}
	}

	host, port, _ := net.SplitHostPort(srv.Addr())
	for _, m := range recs {
		if m["msg"] != logMsgAttempt {
			continue
		}
		for _, k := range []string{"outbound.system", "http.request.method", "server.address", "server.port", "url.path",
			"http.response.status_code", "outbound.duration_ms", "outbound.outcome"} {
			if _, ok := m[k]; !ok {
				t.Errorf("attempt record without %q: %v", k, m)
			}
		}
		if m["outbound.system"] != "inv" || m["http.request.method"] != "GET" || m["server.address"] != host ||
			fmt.Sprint(m["server.port"]) != port {
			t.Errorf("attempt record %v: want system inv, method GET, server %s port %s", m, host, port)
		}
		if d, _ := m["outbound.duration_ms"].(float64); d < 0 {
			t.Errorf("negative outbound.duration_ms: %v", m)
		}
	}
	if m := find("the success", attempt("/base/ok", 1, "ok")); m != nil {
		if m["level"] != "DEBUG" || m["http.response.status_code"] != float64(200) {
			t.Errorf("success record %v: want level DEBUG, status 200", m)
		}
	}
	if m := find("the retried 503", attempt("/base/flaky", 1, "retry")); m != nil {
		if m["level"] != "INFO" || m["http.response.status_code"] != float64(503) {
			t.Errorf("retry record %v: want level INFO, status 503", m)
		}
	}
	find("the retry's success", attempt("/base/flaky", 2, "ok"))
	find("the gated call", attempt("/base/gate", 1, "ok"))
	find("the storm's 503s", attempt("/base/down", 1, "retry"))
	if m := find("the bulkhead rejection", func(m map[string]any) bool {
		return m["msg"] == logMsgRefused && m["outbound.outcome"] == "bulkhead_full"
	}); m != nil {
		if m["level"] != "INFO" || m["outbound.system"] != "inv" || m["error.type"] != "bulkhead full" || m["exception.message"] == "" {
			t.Errorf("bulkhead record %v: want level INFO, system inv, error.type bulkhead full, a message", m)
		}
	}
	find("the breaker rejection", func(m map[string]any) bool {
		return m["msg"] == logMsgRefused && m["outbound.outcome"] == "breaker_open"
	})
	if m := find("the breaker transition", func(m map[string]any) bool { return m["msg"] == logMsgBreaker }); m != nil {
		if m["level"] != "WARN" || m["outbound.system"] != "inv" || m["outbound.breaker.from"] != "closed" || m["outbound.breaker.to"] != "open" {
			t.Errorf("breaker record %v: want WARN inv closed -> open", m)
		}
	}
	// Successful calls add no call record: their attempts describe them.
	for _, m := range recs {
		if m["msg"] == logMsgRefused && m["outbound.outcome"] == "ok" {
			t.Errorf("call record for a success: %v", m)
		}
	}
}

// TestLoggerDefaultDiscards checks that without WithLogger a registry has
// no log observer: logging costs nothing by default.
func TestLoggerDefaultDiscards(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": "http://127.0.0.1:1"}
	if obs := loadRegistry(t, env).MustClient("inv").observers; len(obs) != 0 {
		t.Fatalf("observers without a logger: %v", obs)
	}

	if obs := loadRegistry(t, env, WithLogger(slog.New(slog.DiscardHandler))).MustClient("inv").observers; len(obs) != 1 {
		t.Fatalf("observers with a logger: %v, want the log observer", obs)
	}
}
