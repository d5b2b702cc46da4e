package fleet_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// breakerLog is an observer that keeps the breaker changes it is told.
type breakerLog struct {
	mu sync.Mutex
	ev []string
}

func (*breakerLog) ObserveAttempt(observe.AttemptEvent) {}
func (*breakerLog) ObserveCall(observe.CallEvent)       {}
func (l *breakerLog) ObserveBreaker(system string, from, to observe.BreakerState) {
	l.mu.Lock()
	l.ev = append(l.ev, system+" "+string(from)+"->"+string(to))
	l.mu.Unlock()
}

func (l *breakerLog) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ev)
}

// callUntil calls c every 5ms until its breaker is in state want.
func callUntil(t *testing.T, c *registry.Client, want observe.BreakerState) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, syncWait, "breaker "+string(want), func() bool {
		if c.Status().Breaker == want {
			return true
		}
		get(ctx, c)
		time.Sleep(5 * time.Millisecond)
		return c.Status().Breaker == want
	})
}

// TestFleetChangesReachObservers: two pods, each with its own observer.
// Pod A's local breaker trips and opens the fleet's; pod B, which made
// no call, is told closed->open, then open->half-open when the open time
// passes, then half-open->closed when its probe closes the fleet's
// breaker: each change once, as its Status shows it. A, whose own
// breaker tripped, is told each of its changes once too, though its local
// breaker and the fleet both moved.
func TestFleetChangesReachObservers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var healthy atomic.Bool
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	extra := map[string]string{"PAYMENTS_BREAKER_MIN_REQUESTS": "5", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "400ms",
		"PAYMENTS_BREAKER_HALF_OPEN_PROBES": "1"}
	logA, logB := &breakerLog{}, &breakerLog{}
	a := startPods(t, 1, srv, "observe", "fleet", up.URL, extra, registry.WithObserver(logA))[0]
	recB := statuspage.NewRecorder()
	b := startPods(t, 1, srv, "observe", "fleet", up.URL, extra, registry.WithObserver(logB), registry.WithObserver(recB))[0]

	callUntil(t, a.c, observe.BreakerOpen)
	waitFor(t, syncWait, "B told of the fleet's open", func() bool { return len(logB.events()) == 1 })
	if st := b.c.Status().Breaker; st != observe.BreakerOpen {
		t.Errorf("B's Status: %s, want open", st)
	}
	// B's status page says when: the change reached its recorder too.
	w := httptest.NewRecorder()
	statuspage.Handler(b.reg, recB).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/status.json", nil))
	var snap statuspage.Snapshot
	if err := json.Unmarshal(w.Body.Bytes(), &snap); err != nil || len(snap.Systems) != 1 {
		t.Fatalf("status.json: %v\n%s", err, w.Body)
	}
	if s := snap.Systems[0]; s.Breaker != observe.BreakerOpen || s.BreakerChangedAt == nil {
		t.Errorf("B's status page: breaker %s, changed at %v; want open, with a time", s.Breaker, s.BreakerChangedAt)
	}
	healthy.Store(true)
	// No call, no Status: the loop tells B of the half-open by itself.
	waitFor(t, syncWait, "B told of the half-open", func() bool { return len(logB.events()) == 2 })
	callUntil(t, b.c, observe.BreakerClosed)
	waitFor(t, syncWait, "B told of the close", func() bool { return len(logB.events()) == 3 })

	// A's own breaker went half-open under the fleet's; a call closes it.
	callUntil(t, a.c, observe.BreakerClosed)
	time.Sleep(300 * time.Millisecond) // a loop tick or so: a repeat would show
	want := []string{"payments closed->open", "payments open->half-open", "payments half-open->closed"}
	for name, l := range map[string]*breakerLog{"A": logA, "B": logB} {
		if got := l.events(); !slices.Equal(got, want) {
			t.Errorf("pod %s's observer was told:\n  %s\nwant each change once:\n  %s", name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

// TestFleetDegradedReachesObservers: the fleet's breaker is open and pod
// B's own is closed. Redis dies: B runs local, its Status says closed, and
// its observer is told open->closed once; Redis comes back empty, the
// pods write the open state back, and B is told closed->open once.
func TestFleetDegradedReachesObservers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	extra := map[string]string{"PAYMENTS_BREAKER_MIN_REQUESTS": "5", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "30s"}
	logB := &breakerLog{}
	a := startPods(t, 1, srv, "degraded", "fleet", up.URL, extra)[0]
	b := startPods(t, 1, srv, "degraded", "fleet", up.URL, extra, registry.WithObserver(logB))[0]

	callUntil(t, a.c, observe.BreakerOpen)
	waitFor(t, syncWait, "B open", func() bool { return b.c.Status().Breaker == observe.BreakerOpen })
	srv.Kill()
	waitFor(t, syncWait, "B degraded", func() bool { return !b.fleet.Sync().Synced })
	waitFor(t, syncWait, "B told of its local state", func() bool { return len(logB.events()) == 2 })
	if st := b.c.Status().Breaker; st != observe.BreakerClosed {
		t.Errorf("B's Status while degraded: %s, want closed (its own breaker)", st)
	}
	srv.Restart()
	waitFor(t, syncWait, "B open again", func() bool { return b.c.Status().Breaker == observe.BreakerOpen })
	waitFor(t, syncWait, "B told of the open again", func() bool { return len(logB.events()) == 3 })
	time.Sleep(300 * time.Millisecond) // a loop tick or so: a repeat would show
	want := []string{"payments closed->open", "payments open->closed", "payments closed->open"}
	if got := logB.events(); !slices.Equal(got, want) {
		t.Errorf("B's observer was told:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
