package observe

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEveryOpIsNamedOnce checks that the table names each op, and no two
// alike: errors, logs and metric labels print the name.
func TestEveryOpIsNamedOnce(t *testing.T) {
	seen := map[string]Op{}
	for op := Op(1); op < numOps; op++ {
		name := op.String()
		if name == "" {
			t.Errorf("op %d has no name", op)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("ops %d and %d are both named %q", prev, op, name)
		}
		seen[name] = op
	}
	if Op(0).String() != "" || Op(200).String() != "" {
		t.Errorf("the zero op and an unknown op must print as nothing")
	}
}

// TestRefusalsAreOutcomesOfTheirOwn checks that every op that refuses a
// call before any I/O has an outcome that says so, is never retried and is
// never a failure of the upstream for the breaker.
func TestRefusalsAreOutcomesOfTheirOwn(t *testing.T) {
	for op := Op(1); op < numOps; op++ {
		out := op.Outcome(false)
		if !out.Refused() {
			continue
		}
		if op.Retryable() || op.Verdict() != VerdictExcluded {
			t.Errorf("%s refuses (%s) but is retried (%v) or counted (%v)", op, out, op.Retryable(), op.Verdict())
		}
		if op.Reason() == "" {
			t.Errorf("%s refuses (%s) with no reason for a refusal response", op, out)
		}
		if back, ok := OpOfReason(op.Reason()); !ok || back != op {
			t.Errorf("OpOfReason(%q) = %v, %v; want %s", op.Reason(), back, ok, op)
		}
	}
	if _, ok := OpOfReason(""); ok {
		t.Error(`OpOfReason("") found an op`)
	}
	if _, ok := OpOfReason("made-up"); ok {
		t.Error(`OpOfReason("made-up") found an op`)
	}
}

// TestRetriedOpsAreFailures checks that the breaker counts what the retry
// stage retries: a failure a retry may cure is a failure of the upstream.
func TestRetriedOpsAreFailures(t *testing.T) {
	for op := Op(1); op < numOps; op++ {
		if op.Retryable() && op.Verdict() != VerdictFailure {
			t.Errorf("%s is retried but the breaker counts it %v", op, op.Verdict())
		}
		if op.Retryable() && op.Outcome(false) != OutcomeRetry {
			t.Errorf("%s is retried but labelled %s", op, op.Outcome(false))
		}
		if op.Verdict() == VerdictFailure && op.Outcome(true) != OutcomeGaveUp {
			t.Errorf("%s ends a last attempt as %s, want gave_up", op, op.Outcome(true))
		}
	}
}

// TestDeadlinesAreTimeouts checks that every op matching
// context.DeadlineExceeded, but a budget spent before the call, is a
// timeout, and that deadlines end calls (gave_up), never a retry.
func TestDeadlinesAreTimeouts(t *testing.T) {
	for op := Op(1); op < numOps; op++ {
		if op.Deadline() && op != OpBudget && !op.Timeout() {
			t.Errorf("%s is the call's deadline but not a timeout", op)
		}
		if op.Deadline() && op.Retryable() {
			t.Errorf("%s is the call's deadline but retried", op)
		}
	}
}

// TestOutcomesApplyToCallsOrAttempts checks the lists a metric builds its
// series from: each outcome applies to something, retry and hedge_lost to
// attempts only, the refusals before any attempt to calls only.
func TestOutcomesApplyToCallsOrAttempts(t *testing.T) {
	calls, attempts := CallOutcomes(), AttemptOutcomes()
	for o := Outcome(0); o < numOutcomes; o++ {
		if !slices.Contains(calls, o) && !slices.Contains(attempts, o) {
			t.Errorf("%s applies to nothing", o)
		}
	}
	for _, o := range []Outcome{OutcomeRetry, OutcomeHedgeLost} {
		if slices.Contains(calls, o) {
			t.Errorf("%s is listed for calls", o)
		}
	}
	for _, o := range []Outcome{OutcomeBulkheadFull, OutcomeBudgetSpent, OutcomeRetryThrottled} {
		if slices.Contains(attempts, o) {
			t.Errorf("%s is listed for attempts", o)
		}
	}
	if len(calls)+len(attempts) < NumOutcomes {
		t.Errorf("%d call and %d attempt outcomes cover fewer than the %d outcomes", len(calls), len(attempts), NumOutcomes)
	}
	if Outcome(250).String() != "unknown" {
		t.Errorf("an unknown outcome prints %q", Outcome(250).String())
	}
}

func TestStatusClass(t *testing.T) {
	for code, want := range map[int]string{0: "", 99: "", 100: "1xx", 200: "2xx", 204: "2xx", 301: "3xx", 404: "4xx", 429: "4xx", 501: "5xx", 599: "5xx", 600: ""} {
		if got := StatusClass(code); got != want {
			t.Errorf("StatusClass(%d) = %q, want %q", code, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = StatusClass(503) }); n != 0 {
		t.Errorf("StatusClass allocates %v times", n)
	}
}

// TestARefusalHasOneName checks that each refusal is one name in every
// medium: the outcome's label (breaker_open), the op's name in errors
// and error.type (breaker open), and the reason of a refusal response
// (breaker-open), and that the reason leads back to its op.
func TestARefusalHasOneName(t *testing.T) {
	n := 0
	for op := range numOps {
		out := op.Outcome(true)
		if !out.Refused() {
			continue
		}
		n++
		label := out.String()
		if got, want := op.String(), strings.ReplaceAll(label, "_", " "); got != want {
			t.Errorf("op of %s is named %q, want %q", label, got, want)
		}
		if got, want := op.Reason(), strings.ReplaceAll(label, "_", "-"); got != want {
			t.Errorf("reason of %s is %q, want %q", label, got, want)
		}
		if back, ok := OpOfReason(op.Reason()); !ok || back != op {
			t.Errorf("OpOfReason(%q) = %v, %v; want %v", op.Reason(), back, ok, op)
		}
	}
	if n < 5 {
		t.Errorf("%d refusal ops, want at least 5 (breaker, forced open, bulkhead, budget, rate limit)", n)
	}
}
