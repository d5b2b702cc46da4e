package registry

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// countingCircuit stands in for a fleet's breaker: it passes every
// attempt to the local breaker and counts the verdicts of Judge.
type countingCircuit struct {
	local Circuit
	mu    sync.Mutex
	seen  map[observe.Verdict]int
}

func (c *countingCircuit) Execute(send func() (*http.Response, error)) (*http.Response, error) {
	resp, err := c.local.Execute(send)
	c.mu.Lock()
	c.seen[Judge(err)]++
	c.mu.Unlock()
	return resp, err
}
func (c *countingCircuit) State() gobreaker.State   { return c.local.State() }
func (c *countingCircuit) Counts() gobreaker.Counts { return c.local.Counts() }
func (c *countingCircuit) FleetSync() observe.FleetSync {
	return observe.FleetSync{Synced: false, Since: time.Unix(1, 0), LastError: "redis down"}
}

func fleetEnv(baseURL string) map[string]string {
	return map[string]string{
		"OUTBOUND_SYSTEMS":         "pay,inv",
		"PAY_BASE_URL":             baseURL,
		"PAY_RETRIES":              "0",
		"PAY_BREAKER_SCOPE":        "fleet",
		"INV_BASE_URL":             baseURL,
		"OUTBOUND_FLEET_REDIS_URL": "redis://127.0.0.1:1",
		"OUTBOUND_FLEET_NAMESPACE": "test",
	}
}

// Issue 13: a system at BREAKER_SCOPE=fleet gets the fleet's circuit,
// which wraps the system's own; a system at scope local keeps its own.
// The stand-in counts with Judge as the local breaker does, and its sync
// state shows in Status.
func TestIssue13FleetCircuit(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable}, outboundtest.Reply{Body: "ok"})
	loaded, err := config.LoadEnv(fleetEnv(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	var wrapped []string
	var fc *countingCircuit
	r, err := New(loaded, WithFleet(circuitFleet(func(system string, s config.Client, local Circuit) (Circuit, error) {
		wrapped = append(wrapped, system)
		if s.BreakerScope != "fleet" || local == nil {
			t.Errorf("wrap got scope %q, local %v", s.BreakerScope, local)
		}
		fc = &countingCircuit{local: local, seen: map[observe.Verdict]int{}}
		return fc, nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(wrapped) != 1 || wrapped[0] != "pay" {
		t.Fatalf("wrapped %v, want [pay]", wrapped)
	}
	pay := r.MustClient("pay")
	for range 2 {
		resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/")
		if err != nil {
			t.Fatal(err)
		}
		tbrRead(t, resp)
	}
	if fc.seen[observe.VerdictFailure] != 1 || fc.seen[observe.VerdictSuccess] != 1 {
		t.Errorf("verdicts %v, want one failure (503) and one success", fc.seen)
	}
	if st := pay.Status(); st.Fleet == nil || st.Fleet.Synced || st.Fleet.LastError != "redis down" {
		t.Errorf("pay Status().Fleet = %+v, want the fleet's sync state", st.Fleet)
	}
	if st := r.MustClient("inv").Status(); st.Fleet != nil {
		t.Errorf("inv (scope local) Status().Fleet = %+v, want nil", st.Fleet)
	}
}

// Issue 13: a registry with a system at scope fleet and no fleet refuses
// to build, naming the variable and the way out.
func TestIssue13FleetScopeWithoutFleet(t *testing.T) {
	loaded, err := config.LoadEnv(fleetEnv("http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]Option{nil, {WithFleet(nil)}} {
		r, err := New(loaded, opts...)
		if err == nil {
			r.Close()
			t.Fatal("New with a system at scope fleet and no fleet: no error")
		}
		if msg := err.Error(); !strings.Contains(msg, "PAY_BREAKER_SCOPE=fleet") || !strings.Contains(msg, "(*fleet.Fleet).Option()") {
			t.Errorf("error %q does not name the variable and the fleet option", msg)
		}
	}
}

// changeLog is an observer that keeps the breaker changes it is told.
type changeLog struct {
	mu sync.Mutex
	ev []string
}

func (*changeLog) ObserveAttempt(observe.AttemptEvent) {}
func (*changeLog) ObserveCall(observe.CallEvent)       {}
func (l *changeLog) ObserveBreaker(system string, from, to observe.BreakerState) {
	l.mu.Lock()
	l.ev = append(l.ev, system+" "+string(from)+"->"+string(to))
	l.mu.Unlock()
}

func (l *changeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.ev, "; ")
}

// reportingCircuit is a countingCircuit that reports its own states: it
// keeps the local breaker's changes it is given and the registry's hook.
type reportingCircuit struct {
	*countingCircuit
	report func(from, to gobreaker.State)
	local  []string
}

func (c *reportingCircuit) ReportStates(report func(from, to gobreaker.State)) func(from, to gobreaker.State) {
	c.report = report
	return func(from, to gobreaker.State) { c.local = append(c.local, from.String()+"->"+to.String()) }
}

// Issue 13: a fleet circuit that is a StateReporter gets the registry's
// observer hook and the local breaker's changes, which no longer reach
// the observers directly (the circuit reports what its State shows, once);
// one that is not leaves the local breaker's changes to the observers.
func TestIssue13StateReporter(t *testing.T) {
	srv := testutil.Script(t, outboundtest.Reply{Status: http.StatusServiceUnavailable})
	env := fleetEnv(srv.URL)
	env["PAY_BREAKER_MIN_REQUESTS"] = "1"
	loaded, err := config.LoadEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, reports := range []bool{false, true} {
		obs := &changeLog{}
		var rc *reportingCircuit
		r, err := New(loaded, WithObserver(obs), WithFleet(circuitFleet(func(_ string, _ config.Client, local Circuit) (Circuit, error) {
			cc := &countingCircuit{local: local, seen: map[observe.Verdict]int{}}
			if !reports {
				return cc, nil
			}
			rc = &reportingCircuit{countingCircuit: cc}
			return rc, nil
		})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		pay := r.MustClient("pay")
		resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/") // 503: the local breaker trips
		if err != nil {
			t.Fatal(err)
		}
		tbrRead(t, resp)
		if !reports {
			if got := obs.String(); got != "pay closed->open" {
				t.Errorf("no StateReporter: observer told %q, want the local breaker's change", got)
			}
			continue
		}
		if got := obs.String(); got != "" || rc.report == nil || strings.Join(rc.local, "; ") != "closed->open" {
			t.Fatalf("StateReporter: observer told %q, circuit given %q and hook %v; want nothing, closed->open, a hook", got, rc.local, rc.report != nil)
		}
		rc.report(gobreaker.StateOpen, gobreaker.StateHalfOpen)
		if got := obs.String(); got != "pay open->half-open" {
			t.Errorf("StateReporter: observer told %q, want what the circuit reported", got)
		}
	}
}

// circuitFleet is a Fleet that gives the systems at BREAKER_SCOPE=fleet
// the Circuit its function returns, and no quota.
type circuitFleet func(system string, settings config.Client, local Circuit) (Circuit, error)

func (f circuitFleet) Circuit(system string, settings config.Client, local Circuit) (Circuit, error) {
	return f(system, settings, local)
}

func (f circuitFleet) Quota(system string, _ config.Client, _ Quota) (Quota, error) {
	return nil, errors.New("no quota in this fleet: " + system)
}
