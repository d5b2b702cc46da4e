package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/sony/gobreaker/v2"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestJudgeIsTheBreakersOwnRule checks the verdict of each kind of
// error, without an allocation.
func TestJudgeIsTheBreakersOwnRule(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want observe.Verdict
	}{
		{nil, observe.VerdictSuccess},
		{ErrFailedStatus, observe.VerdictFailure},
		{&Attempt{Op: observe.OpConnect, Err: Open}, observe.VerdictFailure},
		{&Attempt{Op: observe.OpCanceled, Excluded: true, Err: Open}, observe.VerdictExcluded},
		{gobreaker.ErrOpenState, observe.VerdictExcluded},
		{gobreaker.ErrTooManyRequests, observe.VerdictExcluded},
	} {
		if got := Judge(tc.err); got != tc.want {
			t.Errorf("Judge(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { Judge(ErrFailedStatus) }); n != 0 {
		t.Errorf("Judge allocates %v times", n)
	}
}

// TestRefusalsMatchErrOpenAndGobreakers checks that each refusal cause
// matches ErrOpen and unwraps to gobreaker's own error.
func TestRefusalsMatchErrOpenAndGobreakers(t *testing.T) {
	for cause, inner := range map[error]error{Open: gobreaker.ErrOpenState, ProbesBusy: gobreaker.ErrTooManyRequests, ForcedOpen: gobreaker.ErrOpenState} {
		if !errors.Is(cause, ErrOpen) || !errors.Is(cause, inner) {
			t.Errorf("%v: matches ErrOpen %v, %v %v", cause, errors.Is(cause, ErrOpen), inner, errors.Is(cause, inner))
		}
	}
}

// TestExcludedGivesABudgetCutNoFairChance checks that a cut by the
// caller's budget counts against the upstream only after a fair chance.
func TestExcludedGivesABudgetCutNoFairChance(t *testing.T) {
	for _, c := range []struct {
		op    observe.Op
		avail time.Duration
		want  bool
	}{
		{observe.OpBudgetTimeout, 50 * time.Millisecond, true},
		{observe.OpBudgetTimeout, MinFairAttempt, false},
		{observe.OpBudgetTimeout, -1, false},
		{observe.OpCanceled, time.Hour, true},
		{observe.OpRateLimit, time.Hour, true},
		{observe.OpConnect, time.Millisecond, false},
	} {
		if got := Excluded(c.op, c.avail); got != c.want {
			t.Errorf("Excluded(%s, %v) = %v, want %v", c.op, c.avail, got, c.want)
		}
	}
}
