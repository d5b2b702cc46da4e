package capbudget_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/capbudget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errOwn = errors.New("caller's own cause")

// callerCtx builds the caller's context inside the synctest bubble; its
// cancel function is registered with t.Cleanup.
type callerCtx func(t *testing.T) context.Context

func background(*testing.T) context.Context { return context.Background() }

func withTimeout(d time.Duration) callerCtx {
	return func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}
}

func withTimeoutCause(d time.Duration, cause error) callerCtx {
	return func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeoutCause(context.Background(), d, cause)
		t.Cleanup(cancel)
		return ctx
	}
}

func cancelled(d time.Duration, cause error) callerCtx {
	return func(t *testing.T) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		if d > 0 {
			var cancelT context.CancelFunc
			ctx, cancelT = context.WithTimeout(ctx, d)
			t.Cleanup(cancelT)
		}
		cancel(cause)
		return ctx
	}
}

// deadlineOnly reports a deadline but is never done by itself, which models
// a caller whose deadline has passed but whose timer has not fired yet.
type deadlineOnly struct {
	context.Context
	deadline time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.deadline, true }

func passedDeadline(ago time.Duration) callerCtx {
	return func(*testing.T) context.Context {
		return deadlineOnly{context.Background(), time.Now().Add(-ago)}
	}
}

func TestCapWith(t *testing.T) {
	tests := []struct {
		name        string
		caller      callerCtx
		callTimeout time.Duration
		reserve     time.Duration

		doneNow      bool          // returned ctx must be done before any time passes
		noDeadline   bool          // returned ctx must have no deadline
		wantDeadline time.Duration // offset from the start of the test
		wantErr      error
		wantCause    error
	}{
		{name: "no caller deadline", caller: background, callTimeout: 2 * time.Second, reserve: 100 * time.Millisecond,
			wantDeadline: 2 * time.Second, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrCallTimeout},
		{name: "no caller deadline and no call timeout", caller: background, callTimeout: 0, reserve: 100 * time.Millisecond,
			noDeadline: true},
		{name: "no caller deadline and negative call timeout", caller: background, callTimeout: -time.Second,
			noDeadline: true},
		{name: "caller 300ms left, 5s call timeout", caller: withTimeout(300 * time.Millisecond), callTimeout: 5 * time.Second, reserve: 100 * time.Millisecond,
			wantDeadline: 200 * time.Millisecond, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrExhausted},
		{name: "caller 10s left, 2s call timeout", caller: withTimeout(10 * time.Second), callTimeout: 2 * time.Second, reserve: 100 * time.Millisecond,
			wantDeadline: 2 * time.Second, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrCallTimeout},
		{name: "remaining equals call timeout", caller: withTimeout(2100 * time.Millisecond), callTimeout: 2 * time.Second, reserve: 100 * time.Millisecond,
			wantDeadline: 2 * time.Second, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrCallTimeout},
		{name: "remaining just below call timeout", caller: withTimeout(2099 * time.Millisecond), callTimeout: 2 * time.Second, reserve: 100 * time.Millisecond,
			wantDeadline: 1999 * time.Millisecond, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrExhausted},
		{name: "caller deadline, zero call timeout", caller: withTimeout(time.Second), callTimeout: 0, reserve: 100 * time.Millisecond,
			wantDeadline: 900 * time.Millisecond, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrExhausted},
		{name: "caller deadline, negative call timeout", caller: withTimeout(time.Second), callTimeout: -time.Second, reserve: 100 * time.Millisecond,
			wantDeadline: 900 * time.Millisecond, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrExhausted},
		{name: "caller 100ms left, 100ms reserve", caller: withTimeout(100 * time.Millisecond), callTimeout: 5 * time.Second, reserve: 100 * time.Millisecond,
			doneNow: true, wantDeadline: 0, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrExhausted},
		{name: "caller 50ms left", caller: withTimeout(50 * time.Millisecond), callTimeout: 5 * time.Second, reserve: 100 * time.Millisecond,
			doneNow: true, wantDeadline: -50 * time.Millisecond, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrExhausted},
		{name: "caller deadline passed, not yet fired", caller: passedDeadline(time.Second), callTimeout: 5 * time.Second, reserve: 0,
			doneNow: true, wantDeadline: -time.Second, wantErr: context.DeadlineExceeded, wantCause: capbudget.ErrExhausted},
		{name: "caller already cancelled", caller: cancelled(0, nil), callTimeout: 5 * time.Second, reserve: 100 * time.Millisecond,
			doneNow: true, noDeadline: true, wantErr: context.Canceled, wantCause: context.Canceled},
		{name: "caller already cancelled with own cause", caller: cancelled(0, errOwn), callTimeout: 5 * time.Second, reserve: 100 * time.Millisecond,
			doneNow: true, noDeadline: true, wantErr: context.Canceled, wantCause: errOwn},
		{name: "caller with deadline already cancelled", caller: cancelled(50*time.Millisecond, nil), callTimeout: 5 * time.Second, reserve: 100 * time.Millisecond,
			doneNow: true, wantDeadline: 50 * time.Millisecond, wantErr: context.Canceled, wantCause: context.Canceled},
		{name: "caller already expired keeps its cause", caller: withTimeoutCause(0, errOwn), callTimeout: 5 * time.Second, reserve: 100 * time.Millisecond,
			doneNow: true, wantDeadline: 0, wantErr: context.DeadlineExceeded, wantCause: errOwn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				ctx, cancel := capbudget.CapWith(tc.caller(t), tc.callTimeout, tc.reserve)
				defer cancel()

				deadline, ok := ctx.Deadline()
				switch {
				case tc.noDeadline && ok:
					t.Fatalf("Deadline() = %v, want none", deadline.Sub(start))
				case !tc.noDeadline && !ok:
					t.Fatalf("no deadline, want %v", tc.wantDeadline)
				case ok && !deadline.Equal(start.Add(tc.wantDeadline)):
					t.Fatalf("deadline = %v from start, want %v", deadline.Sub(start), tc.wantDeadline)
				}

				if tc.doneNow {
					// No time has passed and nothing has been scheduled:
					// the context must be done synchronously.
					select {
					case <-ctx.Done():
					default:
						t.Fatal("returned context is not already done")
					}
					if time.Since(start) != 0 {
						t.Fatalf("fake clock moved by %v", time.Since(start))
					}
					checkDone(t, ctx, tc.wantErr, tc.wantCause)
					return
				}
				if tc.noDeadline {
					time.Sleep(time.Hour)
					synctest.Wait()
					if err := ctx.Err(); err != nil {
						t.Fatalf("unbounded context ended after 1h: %v", err)
					}
					cancel()
					checkDone(t, ctx, context.Canceled, context.Canceled)
					return
				}

				time.Sleep(tc.wantDeadline - time.Millisecond)
				synctest.Wait()
				if err := ctx.Err(); err != nil {
					t.Fatalf("done 1ms before the deadline: %v (cause %v)", err, context.Cause(ctx))
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				checkDone(t, ctx, tc.wantErr, tc.wantCause)
			})
		})
	}
}

func checkDone(t *testing.T, ctx context.Context, wantErr, wantCause error) {
	t.Helper()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("context is not done")
	}
	if err := ctx.Err(); err != wantErr {
		t.Errorf("Err() = %v, want %v", err, wantErr)
	}
	if cause := context.Cause(ctx); cause != wantCause {
		t.Errorf("Cause = %v, want %v", cause, wantCause)
	}
}

func TestCapUsesDefaultReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		caller, cancelCaller := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancelCaller()
		ctx, cancel := capbudget.Cap(caller, 5*time.Second)
		defer cancel()
		deadline, ok := ctx.Deadline()
		if want := start.Add(300*time.Millisecond - capbudget.DefaultReserve); !ok || !deadline.Equal(want) {
			t.Fatalf("Deadline() = %v, %v; want %v from start", deadline.Sub(start), ok, want.Sub(start))
		}
		<-ctx.Done()
		if cause := context.Cause(ctx); cause != capbudget.ErrExhausted {
			t.Fatalf("Cause = %v, want ErrExhausted", cause)
		}
	})
}

// TestCapWithNeverExtends checks that the result never ends after the
// caller, even with no reserve and no per-call bound.
func TestCapWithNeverExtends(t *testing.T) {
	for _, callTimeout := range []time.Duration{-1, 0, time.Second, 5 * time.Second} {
		for _, reserve := range []time.Duration{-time.Second, 0, 10 * time.Millisecond} {
			synctest.Test(t, func(t *testing.T) {
				caller, cancelCaller := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancelCaller()
				callerDeadline, _ := caller.Deadline()
				ctx, cancel := capbudget.CapWith(caller, callTimeout, reserve)
				defer cancel()
				deadline, ok := ctx.Deadline()
				if !ok || deadline.After(callerDeadline) {
					t.Fatalf("CapWith(%v, %v): deadline %v (ok=%v) is after the caller's %v",
						callTimeout, reserve, deadline, ok, callerDeadline)
				}
				<-caller.Done()
				synctest.Wait()
				if ctx.Err() == nil {
					t.Fatalf("CapWith(%v, %v): still running after the caller ended", callTimeout, reserve)
				}
			})
		}
	}
}

func TestCheck(t *testing.T) {
	// firedCap returns a Cap'ed context after its deadline fired.
	firedCap := func(caller time.Duration, callTimeout time.Duration) callerCtx {
		return func(t *testing.T) context.Context {
			ctx, cancel := capbudget.Cap(withTimeout(caller)(t), callTimeout)
			t.Cleanup(cancel)
			deadline, _ := ctx.Deadline()
			time.Sleep(time.Until(deadline))
			synctest.Wait()
			return ctx
		}
	}
	tests := []struct {
		name    string
		ctx     callerCtx
		reserve time.Duration
		want    error
	}{
		{"no deadline", background, 100 * time.Millisecond, nil},
		{"plenty left", withTimeout(time.Second), 100 * time.Millisecond, nil},
		{"just above reserve", withTimeout(100*time.Millisecond + 1), 100 * time.Millisecond, nil},
		{"exactly the reserve left", withTimeout(100 * time.Millisecond), 100 * time.Millisecond, capbudget.ErrExhausted},
		{"50ms left", withTimeout(50 * time.Millisecond), 100 * time.Millisecond, capbudget.ErrExhausted},
		{"zero reserve, 1ns left", withTimeout(1), 0, nil},
		{"deadline passed, not yet fired", passedDeadline(time.Millisecond), 0, capbudget.ErrExhausted},
		{"negative reserve counts as 0", passedDeadline(time.Millisecond), -time.Second, capbudget.ErrExhausted},
		{"zero-time deadline", passedDeadline(time.Duration(math.MaxInt64)), 100 * time.Millisecond, capbudget.ErrExhausted},
		{"cancelled", cancelled(0, nil), 0, context.Canceled},
		{"cancelled with own cause", cancelled(time.Hour, errOwn), 0, errOwn},
		{"plain deadline expired", withTimeout(0), 0, capbudget.ErrExhausted},
		{"deadline expired with own cause", withTimeoutCause(0, errOwn), 0, errOwn},
		{"Cap fired on the budget", firedCap(300*time.Millisecond, 5*time.Second), 0, capbudget.ErrExhausted},
		{"Cap fired on the call timeout", firedCap(10*time.Second, 2*time.Second), 0, capbudget.ErrCallTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if got := capbudget.Check(tc.ctx(t), tc.reserve); got != tc.want {
					t.Fatalf("Check = %v, want %v", got, tc.want)
				}
			})
		})
	}
}

func TestRemaining(t *testing.T) {
	tests := []struct {
		name    string
		ctx     callerCtx
		reserve time.Duration
		want    time.Duration
		wantOK  bool
	}{
		{"no deadline", background, 100 * time.Millisecond, 0, false},
		{"1s left", withTimeout(time.Second), 100 * time.Millisecond, 900 * time.Millisecond, true},
		{"less than the reserve left", withTimeout(50 * time.Millisecond), 100 * time.Millisecond, -50 * time.Millisecond, true},
		{"negative reserve counts as 0", withTimeout(time.Second), -time.Second, time.Second, true},
		{"cancelled does not matter", cancelled(time.Second, nil), 100 * time.Millisecond, 900 * time.Millisecond, true},
		{"deadline passed", passedDeadline(time.Second), 100 * time.Millisecond, -1100 * time.Millisecond, true},
		{"far past saturates", func(*testing.T) context.Context { return deadlineOnly{context.Background(), time.Time{}} },
			100 * time.Millisecond, math.MinInt64, true},
		{"far future saturates", func(*testing.T) context.Context {
			return deadlineOnly{context.Background(), time.Unix(1<<62, 0)}
		}, 100 * time.Millisecond, math.MaxInt64 - 100*time.Millisecond, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, ok := capbudget.Remaining(tc.ctx(t), tc.reserve)
				if got != tc.want || ok != tc.wantOK {
					t.Fatalf("Remaining = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
				}
			})
		})
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	hour, cancelHour := context.WithTimeout(context.Background(), time.Hour)
	defer cancelHour()
	done, cancelDone := context.WithCancelCause(context.Background())
	cancelDone(errOwn)
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()

	tests := []struct {
		name    string
		ctx     context.Context
		reserve time.Duration
		want    error
	}{
		{"ok", hour, capbudget.DefaultReserve, nil},
		{"exhausted", hour, 2 * time.Hour, capbudget.ErrExhausted},
		{"no deadline", context.Background(), capbudget.DefaultReserve, nil},
		{"cancelled", done, capbudget.DefaultReserve, errOwn},
		{"expired", expired, capbudget.DefaultReserve, capbudget.ErrExhausted},
	}
	for _, tc := range tests {
		var got error
		allocs := testing.AllocsPerRun(1000, func() { got = capbudget.Check(tc.ctx, tc.reserve) })
		if allocs != 0 {
			t.Errorf("%s: Check allocates %v times per call, want 0", tc.name, allocs)
		}
		if got != tc.want {
			t.Errorf("%s: Check = %v, want %v", tc.name, got, tc.want)
		}
	}
}
