package registry

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
)

// countingCircuit stands in for a fleet's breaker: it passes every
// attempt to the local breaker and counts the verdicts of Judge.
type countingCircuit struct {
	local Circuit
	mu    sync.Mutex
	seen  map[Verdict]int
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
func (c *countingCircuit) FleetSync() FleetSync {
	return FleetSync{Synced: false, Since: time.Unix(1, 0), LastError: "redis down"}
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
	srv := testutil.Script(t, testutil.Resp{Status: http.StatusServiceUnavailable}, testutil.Resp{Body: "ok"})
	loaded, err := config.LoadEnv(fleetEnv(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	var wrapped []string
	var fc *countingCircuit
	r, err := New(loaded, WithFleetCircuit(func(system string, s config.Client, local Circuit) (Circuit, error) {
		wrapped = append(wrapped, system)
		if s.BreakerScope != "fleet" || local == nil {
			t.Errorf("wrap got scope %q, local %v", s.BreakerScope, local)
		}
		fc = &countingCircuit{local: local, seen: map[Verdict]int{}}
		return fc, nil
	}))
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
	if fc.seen[VerdictFailure] != 1 || fc.seen[VerdictSuccess] != 1 {
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
	for _, opts := range [][]Option{nil, {WithFleetCircuit(nil)}} {
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

// Issue 13: Judge is the local breaker's own rule.
func TestIssue13Judge(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Verdict
	}{
		{nil, VerdictSuccess},
		{errFailedStatus, VerdictFailure},
		{&attemptError{op: OpConnect, err: errOpenState}, VerdictFailure},
		{&attemptError{op: OpCanceled, excluded: true, err: errOpenState}, VerdictExcluded},
		{gobreaker.ErrOpenState, VerdictExcluded},
		{gobreaker.ErrTooManyRequests, VerdictExcluded},
	} {
		if got := Judge(tc.err); got != tc.want {
			t.Errorf("Judge(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { Judge(errFailedStatus) }); n != 0 {
		t.Errorf("Judge allocates %v times", n)
	}
}
