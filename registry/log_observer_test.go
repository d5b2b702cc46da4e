package registry

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/observe"
)

func newTestLogObserver(level slog.Level) (*logObserver, *lockedBuffer) {
	var buf lockedBuffer
	return newLogObserver(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))), &buf
}

func str(v any) string { s, _ := v.(string); return s }

// TestAttemptRecordsUseOpenTelemetryNames checks the attributes of an
// attempt record, and that a transport error has no status attribute.
func TestAttemptRecordsUseOpenTelemetryNames(t *testing.T) {
	o, buf := newTestLogObserver(slog.LevelDebug)
	o.ObserveAttempt(observe.AttemptEvent{System: "inv", RouteName: "stock", Method: "GET", Host: "inv.internal:8443", Path: "/stock/{isbn}",
		Route: "/stock/{isbn}", Attempt: 2, Status: 503, Duration: 1500 * time.Microsecond, Outcome: observe.OutcomeRetry})
	o.ObserveAttempt(observe.AttemptEvent{System: "inv", Method: "GET", Host: "inv.internal", Path: "/raw/1",
		Attempt: 1, Op: observe.OpConnect, Err: errors.New("connection refused"), Outcome: observe.OutcomeRetry})
	recs := logTestRecords(t, buf)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	want := map[string]any{"msg": logMsgAttempt, "level": "INFO", "outbound.system": "inv", "http.request.method": "GET",
		"server.address": "inv.internal", "server.port": 8443.0, "url.template": "/stock/{isbn}", "outbound.route": "stock",
		"http.request.resend_count": 1.0, "http.response.status_code": 503.0, "outbound.outcome": "retry",
		"outbound.duration_ms": 1.5}
	for k, v := range want {
		if recs[0][k] != v {
			t.Errorf("%s = %v, want %v (record %v)", k, recs[0][k], v, recs[0])
		}
	}
	if _, ok := recs[1]["outbound.route"]; ok {
		t.Errorf("an attempt of no route has outbound.route: %v", recs[1])
	}
	for _, k := range []string{"url.path", "error.type", "system", "status", "host"} {
		if _, ok := recs[0][k]; ok {
			t.Errorf("record has %q: %v", k, recs[0])
		}
	}
	e := recs[1]
	if e["error.type"] != "connect" || e["exception.message"] != "connection refused" || e["url.path"] != "/raw/1" {
		t.Errorf("error record %v", e)
	}
	for _, k := range []string{"http.response.status_code", "http.request.resend_count", "server.port"} {
		if _, ok := e[k]; ok {
			t.Errorf("error record has %q: %v", k, e)
		}
	}
}

// TestLogRecordLevels checks the level of each kind of record: successes at
// Debug, failures and refusals at Info, breaker changes at Warn, and no
// record for a call its attempts describe.
func TestLogRecordLevels(t *testing.T) {
	o, buf := newTestLogObserver(slog.LevelInfo)
	o.ObserveAttempt(observe.AttemptEvent{System: "inv", Attempt: 1, Status: 200, Outcome: observe.OutcomeOK}) // Debug: dropped
	o.ObserveAttempt(observe.AttemptEvent{System: "inv", Attempt: 1, Op: observe.OpTransport, Err: errors.New("reset"), Outcome: observe.OutcomeRetry})
	o.ObserveCall(observe.CallEvent{System: "inv", Attempts: 1, Status: 200, Outcome: observe.OutcomeOK})
	o.ObserveCall(observe.CallEvent{System: "inv", Attempts: 2, Op: observe.OpTransport, Err: errors.New("x"), Outcome: observe.OutcomeGaveUp})
	o.ObserveCall(observe.CallEvent{System: "inv", Op: observe.OpBudget, Err: errors.New("budget spent"), Outcome: observe.OutcomeBudgetSpent})
	o.ObserveBreaker("inv", observe.BreakerOpen, observe.BreakerHalfOpen)
	var got []string
	for _, m := range logTestRecords(t, buf) {
		got = append(got, str(m["level"])+" "+str(m["msg"])+" "+str(m["outbound.outcome"])+str(m["outbound.breaker.to"]))
	}
	want := []string{"INFO " + logMsgAttempt + " retry", "INFO " + logMsgRefused + " budget_spent", "WARN " + logMsgBreaker + " half-open"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRefusalsAreSampledPerSystemAndReason checks that a burst of
// refusals gives one record at once, at most one a second after that
// with the count of those not logged, and a closing count when the
// breaker changes state; another system or reason has a burst of its own.
func TestRefusalsAreSampledPerSystemAndReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o, buf := newTestLogObserver(slog.LevelInfo)
		refuse := func(system string, out observe.Outcome, op observe.Op) {
			o.ObserveCall(observe.CallEvent{System: system, Method: "GET", Op: op, Err: errors.New(op.String()), Outcome: out})
		}
		for range 1000 {
			refuse("pay", observe.OutcomeBreakerOpen, observe.OpBreaker)
		}
		refuse("pay", observe.OutcomeBulkheadFull, observe.OpBulkhead)
		refuse("inv", observe.OutcomeBreakerOpen, observe.OpBreaker)
		time.Sleep(logSampleEvery)
		for range 10 {
			refuse("pay", observe.OutcomeBreakerOpen, observe.OpBreaker) // the first carries 999
		}
		o.ObserveBreaker("pay", observe.BreakerOpen, observe.BreakerHalfOpen) // closes with 9
		recs := logTestRecords(t, buf)
		var got []string
		for _, m := range recs {
			n, _ := m["outbound.suppressed"].(float64)
			got = append(got, str(m["msg"])+" "+str(m["outbound.system"])+" "+str(m["outbound.outcome"])+str(m["outbound.breaker.to"])+" "+jsonNum(n))
		}
		want := []string{
			logMsgRefused + " pay breaker_open 0",
			logMsgRefused + " pay bulkhead_full 0",
			logMsgRefused + " inv breaker_open 0",
			logMsgRefused + " pay breaker_open 999",
			logMsgSuppressed + " pay breaker_open 9",
			logMsgBreaker + " pay half-open 0",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if recs[0]["error.type"] != "breaker open" {
			t.Errorf("first refusal without its error.type: %v", recs[0])
		}
	})
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

// TestASuccessEndsABurst checks that a call that is not refused logs the
// count of its system's refusals not logged yet.
func TestASuccessEndsABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o, buf := newTestLogObserver(slog.LevelInfo)
		for range 5 {
			o.ObserveCall(observe.CallEvent{System: "pay", Op: observe.OpBulkhead, Outcome: observe.OutcomeBulkheadFull})
		}
		o.ObserveCall(observe.CallEvent{System: "inv", Attempts: 1, Outcome: observe.OutcomeOK}) // another system: nothing
		o.ObserveCall(observe.CallEvent{System: "pay", Attempts: 1, Outcome: observe.OutcomeOK})
		recs := logTestRecords(t, buf)
		if len(recs) != 2 || recs[1]["msg"] != logMsgSuppressed || recs[1]["outbound.suppressed"] != 4.0 {
			t.Fatalf("records %v, want the first refusal and a count of 4", recs)
		}
		if o.pending.Load() != 0 {
			t.Errorf("pending %d after the flush", o.pending.Load())
		}
	})
}

// TestDisabledLevelCostsNoAllocation checks that a logger whose level is
// above the records' costs no allocation per event.
func TestDisabledLevelCostsNoAllocation(t *testing.T) {
	o := newLogObserver(slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError})))
	failed := errors.New("connection reset")
	attempt := observe.AttemptEvent{System: "inv", Method: "GET", Host: "inv.internal", Path: "/stock/1",
		Attempt: 2, Status: 503, Err: failed, Duration: time.Millisecond, Outcome: observe.OutcomeRetry}
	call := observe.CallEvent{System: "inv", Method: "GET", Err: failed, Outcome: observe.OutcomeBulkheadFull}
	allocs := testing.AllocsPerRun(200, func() {
		o.ObserveAttempt(attempt)
		o.ObserveCall(call)
		o.ObserveBreaker("inv", observe.BreakerClosed, observe.BreakerOpen)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per event at a disabled level, want 0", allocs)
	}
}
