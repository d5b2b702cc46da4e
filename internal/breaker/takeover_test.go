package breaker

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/sony/gobreaker/v2"
)

var (
	okSend     = func() (*http.Response, error) { return nil, nil }
	failedSend = func() (*http.Response, error) { return nil, ErrFailedStatus }
)

func takeoverSettings() config.Client {
	return config.Client{BreakerFailureRatio: 0.5, BreakerMinRequests: 10, BreakerWindow: 30 * time.Second,
		BreakerOpenTimeout: time.Minute, BreakerHalfOpenProbes: 1}
}

// A closed breaker's window goes on in the one that takes over: its
// counts, judged by the rule in force. Counts the new rule trips on open
// the new breaker at once; the takeover itself tells the hook nothing.
func TestTakeOverCarriesAClosedWindow(t *testing.T) {
	c := takeoverSettings()
	old := New("p", c, nil, nil)
	for range 6 {
		_, _ = old.Execute(okSend)
	}
	for range 3 {
		_, _ = old.Execute(failedSend)
	}
	was := Carried{State: old.State(), Counts: old.Counts()}
	changes := 0
	hook := func(from, to gobreaker.State) { changes++ }

	c.BreakerWindow = time.Minute
	cb := was.TakeOver("p", c, NewRule(c), hook)
	if got := cb.Counts(); cb.State() != gobreaker.StateClosed || got.TotalSuccesses != 6 || got.TotalFailures != 3 {
		t.Errorf("after a change of window: %v %+v, want closed with 6 successes and 3 failures", cb.State(), got)
	}
	_, _ = cb.Execute(failedSend) // 4 of 10 failed: the rule of 0.5 holds
	if cb.State() != gobreaker.StateClosed {
		t.Errorf("4 failures of 10 at a ratio of 0.5: %v, want closed", cb.State())
	}

	c.BreakerMinRequests, c.BreakerFailureRatio = 5, 0.3
	cb = was.TakeOver("p", c, NewRule(c), hook)
	if cb.State() != gobreaker.StateOpen {
		t.Errorf("3 failures of 9 under a rule of 0.3 of at least 5: %v, want open", cb.State())
	}
	if changes != 0 {
		t.Errorf("the takeovers told the hook of %d changes, want none", changes)
	}
	_, _ = cb.Execute(okSend)
	if _, err := cb.Execute(okSend); err != gobreaker.ErrOpenState {
		t.Errorf("a call to the breaker taken over open: %v, want ErrOpenState", err)
	}
}

// An open or half-open breaker is open in the one that takes over, for
// the new BREAKER_OPEN_TIMEOUT from the change, then lets the new number
// of probes through; its later changes reach the hook.
func TestTakeOverKeepsItOpenUnderTheNewTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, from := range []gobreaker.State{gobreaker.StateOpen, gobreaker.StateHalfOpen} {
			c := takeoverSettings()
			c.BreakerOpenTimeout, c.BreakerHalfOpenProbes = 10*time.Second, 2
			var seen []gobreaker.State
			cb := Carried{State: from}.TakeOver("p", c, NewRule(c), func(_, to gobreaker.State) { seen = append(seen, to) })
			if _, err := cb.Execute(okSend); err != gobreaker.ErrOpenState {
				t.Fatalf("taken over from %v: %v, want ErrOpenState", from, err)
			}
			time.Sleep(10*time.Second - time.Millisecond)
			if cb.State() != gobreaker.StateOpen {
				t.Errorf("taken over from %v, just before the new open timeout: %v, want open", from, cb.State())
			}
			time.Sleep(2 * time.Millisecond)
			if cb.State() != gobreaker.StateHalfOpen {
				t.Errorf("taken over from %v, past the new open timeout: %v, want half-open", from, cb.State())
			}
			for range 2 {
				if _, err := cb.Execute(okSend); err != nil {
					t.Errorf("a probe: %v", err)
				}
			}
			if cb.State() != gobreaker.StateClosed {
				t.Errorf("2 probes of 2 succeeded: %v, want closed", cb.State())
			}
			if want := []gobreaker.State{gobreaker.StateHalfOpen, gobreaker.StateClosed}; len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
				t.Errorf("the hook heard %v, want %v (nothing of the takeover)", seen, want)
			}
		}
	})
}

// Counts too large to replay are scaled to mostCarried, their ratio
// kept: the takeover costs a bounded time whatever the traffic.
func TestTakeOverScalesLargeCounts(t *testing.T) {
	c := takeoverSettings()
	was := Carried{State: gobreaker.StateClosed, Counts: gobreaker.Counts{TotalSuccesses: 3_000_000, TotalFailures: 1_000_000}}
	cb := was.TakeOver("p", c, NewRule(c), nil)
	got := cb.Counts()
	if got.TotalSuccesses+got.TotalFailures != mostCarried || got.TotalFailures != mostCarried/4 {
		t.Errorf("carried %+v, want %d outcomes, a quarter of them failures", got, mostCarried)
	}
	if cb.State() != gobreaker.StateClosed {
		t.Errorf("a quarter failed under a ratio of 0.5: %v, want closed", cb.State())
	}
}
