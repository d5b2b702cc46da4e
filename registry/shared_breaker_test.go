package registry

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// sharedFleet is a BreakerFleet that gives a sharedFake for each system
// and route at scope fleet, and keeps what it was told of each.
type sharedFleet struct {
	mu      sync.Mutex
	systems map[string]FleetSystem
	shared  map[string]*sharedFake
}

func (f *sharedFleet) SharedBreaker(sys FleetSystem, local LocalBreaker) (SharedBreaker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.systems == nil {
		f.systems, f.shared = map[string]FleetSystem{}, map[string]*sharedFake{}
	}
	sb := &sharedFake{local: local}
	f.systems[sys.Name], f.shared[sys.Name] = sys, sb
	return sb, nil
}

func (f *sharedFleet) Circuit(sys FleetSystem, _ Circuit) (Circuit, error) {
	return nil, fmt.Errorf("%s: a BreakerFleet was asked for a Circuit", sys.Name)
}

func (f *sharedFleet) Quota(sys FleetSystem, _ Quota) (Quota, error) {
	return nil, errors.New("no quota in this fleet: " + sys.Name)
}

// sharedFake is a SharedBreaker that wraps the pod's own breaker: it
// refuses on its own while state is open or half-open (as a fleet does
// on another pod's evidence), and keeps what it is told.
type sharedFake struct {
	local LocalBreaker

	mu      sync.Mutex
	state   observe.BreakerState // "": the local breaker's
	changes []string             // the local breaker's, as LocalChanged got them
	forced  observe.BreakerState
	until   time.Time
	rule    string
}

func (s *sharedFake) set(st observe.BreakerState) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
}

func (s *sharedFake) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if st != "" {
		return nil, fmt.Errorf("the fleet's breaker is %s: %w", st, ErrCircuitOpen)
	}
	return s.local.Execute(send)
}

func (s *sharedFake) Breaker() (observe.BreakerState, observe.BreakerCounts) {
	st, n := s.local.Breaker()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != "" {
		st, n = s.state, observe.BreakerCounts{Requests: 40, Failures: 30, ConsecutiveFailures: 3} // the fleet's window
	}
	return st, n
}

func (s *sharedFake) LocalChanged(from, to observe.BreakerState) {
	s.mu.Lock()
	s.changes = append(s.changes, string(from)+"->"+string(to))
	s.mu.Unlock()
}

func (s *sharedFake) Force(state observe.BreakerState, until time.Time) error {
	s.mu.Lock()
	s.forced, s.until = state, until
	s.mu.Unlock()
	return nil
}

func (s *sharedFake) Forced() (observe.BreakerState, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forced, s.until
}

func (s *sharedFake) SetRule(ratio float64, minRequests int) {
	s.mu.Lock()
	s.rule = fmt.Sprintf("%v/%d", ratio, minRequests)
	s.mu.Unlock()
}

func (s *sharedFake) FleetSync() observe.FleetSync {
	return observe.FleetSync{LastError: "redis down"}
}

func (s *sharedFake) told() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.changes, "; ")
}

// forceLog is a changeLog that also keeps the overrides it is told.
type forceLog struct {
	changeLog
	forces []string
}

func (l *forceLog) ObserveForce(system string, state observe.BreakerState, _ time.Time) {
	l.mu.Lock()
	l.forces = append(l.forces, system+" "+string(state))
	l.mu.Unlock()
}

// A fleet that shares its breakers as SharedBreakers stands in for each
// breaker at scope fleet in outbound's own words: it is asked for no
// Circuit; the local breaker's changes go to it, not to the observers;
// what it reports through the FleetSystem's States and Forces reaches
// the observers; its own refusals are the breaker's (no I/O, matching
// ErrCircuitOpen, "every probe taken" while half-open); Status, Force and
// a change of the rule go through it. A route with a breaker of its own
// gets one too, with no Forces.
func TestSharedBreakerTakesTheBreakersPlace(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	env := fleetEnv(srv.URL)
	env["PAY_BREAKER_MIN_REQUESTS"] = "1"
	env["PAY_ROUTES"], env["PAY_ROUTE_EXPORT_MATCH"], env["PAY_ROUTE_EXPORT_BREAKER"] = "export", "/export/", "own"
	loaded, err := config.LoadEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	obs := &forceLog{}
	fleet := &sharedFleet{}
	r, err := New(loaded, WithObserver(obs), WithFleet(fleet))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sys, route := fleet.systems["pay"], fleet.systems["pay.export"]
	if len(fleet.systems) != 2 || sys.States == nil || sys.Forces == nil || route.States == nil || route.Forces != nil {
		t.Fatalf("the fleet was asked for %d breakers (pay: States %v, Forces %v; pay.export: States %v, Forces %v), want pay with both and pay.export with States only",
			len(fleet.systems), sys.States != nil, sys.Forces != nil, route.States != nil, route.Forces != nil)
	}
	pay, sb := r.MustClient("pay"), fleet.shared["pay"]

	// The local breaker trips on a 503: the shared breaker is told, the
	// observers are not; its refusal then passes through as the local
	// breaker's.
	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/")
	if err != nil {
		t.Fatal(err)
	}
	tbrRead(t, resp)
	if got, told := sb.told(), obs.String(); got != "closed->open" || told != "" {
		t.Fatalf("after a trip: shared breaker told %q, observers %q; want closed->open and nothing", got, told)
	}
	_, _, err = tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/")
	if !errors.Is(err, ErrCircuitOpen) || !strings.Contains(err.Error(), "breaker open") {
		t.Errorf("the local breaker open: error %v, want one matching ErrCircuitOpen, breaker open", err)
	}

	// What the shared breaker reports reaches the observers.
	sys.States(observe.BreakerOpen, observe.BreakerHalfOpen)
	if got := obs.String(); got != "pay open->half-open" {
		t.Errorf("observers told %q, want what the shared breaker reported", got)
	}
	sys.Forces(observe.BreakerClosed, time.Now().Add(time.Minute))
	if got := strings.Join(obs.forces, "; "); got != "pay closed" {
		t.Errorf("observers told of overrides %q, want the one the shared breaker learned", got)
	}

	// Its own refusals: open, then half-open with every probe taken.
	before := srv.Hits()
	for _, c := range []struct {
		state observe.BreakerState
		says  string
	}{{observe.BreakerOpen, "breaker open"}, {observe.BreakerHalfOpen, "every probe taken"}} {
		sb.set(c.state)
		_, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/other")
		if !errors.Is(err, ErrCircuitOpen) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("shared breaker %s: error %v, want one matching ErrCircuitOpen that says %q", c.state, err, c.says)
		}
		if st := pay.Status(); st.Breaker != c.state || st.BreakerCounts != (observe.BreakerCounts{Requests: 40, Failures: 30, ConsecutiveFailures: 3}) || st.Fleet == nil || st.Fleet.LastError != "redis down" {
			t.Errorf("shared breaker %s: Status breaker %s, counts %+v, fleet %+v; want its state, counts and sync", c.state, st.Breaker, st.BreakerCounts, st.Fleet)
		}
	}
	if n := srv.Hits() - before; n != 0 {
		t.Errorf("the shared breaker refused, yet %d requests reached the upstream", n)
	}

	if err := pay.Force(observe.BreakerOpen, time.Minute); err != nil {
		t.Fatal(err)
	}
	if st, until := sb.Forced(); st != observe.BreakerOpen || time.Until(until) <= 0 {
		t.Errorf("Force: the shared breaker holds %q until %v, want open for a minute", st, until)
	}
	if st := pay.Status(); st.Forced == nil || st.Forced.State != observe.BreakerOpen {
		t.Errorf("Status().Forced = %+v, want the shared breaker's override", st.Forced)
	}
}

// A change of the settings file's breaker rule reaches a shared breaker
// by its SetRule, and the system keeps it: no restart.
func TestSharedBreakerTakesARuleChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAY_BREAKER_MIN_REQUESTS=10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fleet := &sharedFleet{}
	env := fleetEnv("http://127.0.0.1:1")
	r := liveRegistry(t, env, path, WithFleet(fleet))
	sb := fleet.shared["pay"]
	reloader(t, r, path)("PAY_BREAKER_MIN_REQUESTS=4\nPAY_BREAKER_FAILURE_RATIO=0.25\n")
	sb.mu.Lock()
	rule := sb.rule
	sb.mu.Unlock()
	if rule != "0.25/4" {
		t.Errorf("after the change, the shared breaker's rule is %q, want 0.25/4", rule)
	}
	if r.MustClient("pay") == nil || fleet.shared["pay"] != sb {
		t.Error("the change built another shared breaker; want the same one kept")
	}
}
