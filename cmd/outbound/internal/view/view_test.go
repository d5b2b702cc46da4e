package view

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/cmd/outbound/internal/stats"
	"github.com/outbound-go/outbound/observe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mixed is a system with calls of every kind: two answered 501, which
// the registry labels failed (not ok), and four refused with no I/O.
func mixed() stats.Snap {
	return stats.Snap{
		Name: "pay", Role: "flaky", Calls: 10,
		Outcomes: []stats.Count{
			{Outcome: observe.OutcomeOK, N: 4},
			{Outcome: observe.OutcomeFailed, N: 2, Causes: []stats.Cause{{What: "answered 501", N: 2}}},
			{Outcome: observe.OutcomeBreakerOpen, N: 3},
			{Outcome: observe.OutcomeBulkheadFull, N: 1},
		},
		Attempts: 6, Busy: 2, Opened: 1, FirstOpen: 1500 * time.Millisecond,
		SucceededP50: 2 * time.Millisecond, SucceededP99: 9 * time.Millisecond, RefusedP99: 20 * time.Microsecond, RefusedTimed: 4,
		Status: observe.Status{Breaker: observe.BreakerOpen, Capacity: 2},
	}
}

func summary(snaps ...stats.Snap) string {
	var b bytes.Buffer
	Summary{Snaps: snaps, Elapsed: 3 * time.Second, Workers: 4}.Write(&b)
	return b.String()
}

func TestSummaryCountsCallsByOutcomeAndRefusalsApart(t *testing.T) {
	got := summary(mixed())
	for _, want := range []string{
		"  10 calls, 4 refused with no I/O (3 breaker_open, 1 bulkhead_full).\n",
		"  Of the 6 sent: 4 ok (66%), 2 failed (answered 501).\n",
		"refused 3 calls with no I/O; it ended open.",
		"Its bulkhead (2 in flight) shed 1 calls",
		"What was shed: 4 calls were refused before any I/O (3 breaker_open, 1 bulkhead_full)",
		"a refusal (breaker_open, bulkhead_full, ...) sent nothing",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "What stayed fast: pay") {
		t.Errorf("a system with 501s and refusals is called fast:\n%s", got)
	}
}

func TestSummaryOfASystemWithoutRefusals(t *testing.T) {
	s := stats.Snap{Name: "cat", Calls: 100, Outcomes: []stats.Count{
		{Outcome: observe.OutcomeOK, N: 95},
		{Outcome: observe.OutcomeGaveUp, N: 5, Causes: []stats.Cause{{What: "read timeout", N: 4}, {What: "call timeout", N: 1}}},
	}, SucceededP99: 900 * time.Millisecond}
	got := summary(s)
	for _, want := range []string{
		"  100 calls: 95 ok (95%), 5 gave_up (4 read timeout, 1 call timeout).\n",
		"What was shed: nothing; every call was sent.",
		"Slow but served: cat (95% ok, p99 900ms)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

func TestSummaryOfSystemsAllOkAllRefusedAndIdle(t *testing.T) {
	ok := stats.Snap{Name: "inv", Calls: 3, Outcomes: []stats.Count{{Outcome: observe.OutcomeOK, N: 3}}, SucceededP99: time.Millisecond}
	refused := stats.Snap{Name: "ship", Calls: 2, Outcomes: []stats.Count{{Outcome: observe.OutcomeBreakerOpen, N: 2}}}
	got := summary(ok, refused, stats.Snap{Name: "idle"})
	for _, want := range []string{
		"  3 calls, all ok.\n",
		"  2 calls, 2 refused with no I/O (2 breaker_open).\n  None was sent.\n",
		"No calls were made",
		"What stayed fast: inv (p99 1.0ms)",
		"What tripped: nothing",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

func TestLiveTableShowsRefusalsApartFromCallsNotOk(t *testing.T) {
	var b bytes.Buffer
	LiveTable(&b, []stats.Snap{mixed()}, 1500*time.Millisecond, 20*time.Second)
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 4 {
		t.Fatalf("table:\n%s", b.String())
	}
	head, row := strings.Fields(lines[2]), strings.Fields(lines[3])
	cols := map[string]string{}
	for i, h := range []string{"system", "calls", "ok", "not-ok", "refused"} {
		cols[h] = row[i]
	}
	if head[3] != "not" || head[5] != "refused" || cols["calls"] != "10" || cols["ok"] != "4" || cols["not-ok"] != "2" || cols["refused"] != "4" {
		t.Errorf("want 10 calls, 4 ok, 2 not ok, 4 refused:\n%s", b.String())
	}
}

func TestDurRendersLatenciesReadably(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "-", 120 * time.Microsecond: "0.12ms", 3400 * time.Microsecond: "3.4ms",
		520 * time.Millisecond: "520ms", 1300 * time.Millisecond: "1.3s",
	} {
		if got := Dur(d); got != want {
			t.Errorf("Dur(%v) = %q, want %q", d, got, want)
		}
	}
}
