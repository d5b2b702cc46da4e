package registry

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// resilMedian returns the median of ds (which it sorts).
func resilMedian(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// One system with a full bulkhead, and then an open breaker, neither fails
// nor slows another system: each has its own bulkhead, breaker, transport
// and connection pool.
func TestIsolationBetweenSystems(t *testing.T) {
	t.Parallel()
	// alpha's server parks every request, then answers 503.
	gateA := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusServiceUnavailable, Body: "down"})
	srvA := outboundtest.NewUpstream(t, gateA)
	srvB := testutil.Script(t, outboundtest.Reply{Status: http.StatusOK, Body: "ok"})
	const capA = 4
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS":            "alpha,beta",
		"ALPHA_BASE_URL":              srvA.URL,
		"ALPHA_MAX_CONCURRENT":        "4",
		"ALPHA_RETRIES":               "0",
		"ALPHA_BREAKER_MIN_REQUESTS":  "4",
		"ALPHA_BREAKER_FAILURE_RATIO": "0.5",
		"ALPHA_BREAKER_OPEN_TIMEOUT":  "10m",
		"BETA_BASE_URL":               srvB.URL,
	})
	defer r.Close()
	a, b := r.MustClient("alpha"), r.MustClient("beta")
	if a.HTTPClient() == b.HTTPClient() {
		t.Fatal("alpha and beta share an *http.Client")
	}

	const perPhase = 30
	betaCalls := 0
	// runB makes perPhase sequential calls to beta and returns their
	// latencies; every one must succeed.
	runB := func(phase string) []time.Duration {
		t.Helper()
		lat := make([]time.Duration, 0, perPhase)
		for i := range perPhase {
			res := resilGet(b, "/items", resilBound)
			if res.err != nil || res.status != http.StatusOK || res.body != "ok" {
				t.Fatalf("%s: beta call %d: %v, want 200 ok", phase, i+1, res)
			}
			lat = append(lat, res.took)
			betaCalls++
		}
		return lat
	}
	// checkB compares beta's latencies in a phase with the baseline, with
	// a generous margin: a pool or lock shared with alpha's parked calls
	// would hold beta's until the gate opens, after this check (each would
	// hit its 10s bound), while a loaded machine's scheduler can add tens
	// of milliseconds to a phase.
	checkB := func(phase string, base, lat []time.Duration) {
		t.Helper()
		mb, ml := resilMedian(base), resilMedian(lat)
		if limit := 20*mb + 500*time.Millisecond; ml > limit {
			t.Errorf("%s: beta median latency %v, baseline %v (limit %v)", phase, ml, mb, limit)
		}
		if mx := slices.Max(lat); mx > 5*time.Second {
			t.Errorf("%s: a beta call took %v", phase, mx)
		}
		t.Logf("%s: beta median %v (baseline %v), max %v", phase, ml, mb, slices.Max(lat))
	}

	base := runB("baseline")

	// Phase 1: alpha's bulkhead is full, its calls parked at the gate.
	held := make([]<-chan resilResult, capA)
	for i := range held {
		held[i] = resilGo(a, "/orders", resilBound)
	}
	resilWaitParked(t, gateA, capA)
	for i := range 20 {
		res := resilGet(a, "/orders", resilBound)
		if !errors.Is(res.err, bulkhead.ErrFull) {
			t.Fatalf("alpha call %d with its bulkhead full: %v, want ErrFull", i+1, res)
		}
	}
	checkB("alpha bulkhead full", base, runB("alpha bulkhead full"))
	if st := a.Status(); st.InFlight != capA || st.BulkheadRefused != 20 {
		t.Fatalf("alpha: in flight %d, rejected %d; want %d, 20", st.InFlight, st.BulkheadRefused, capA)
	}

	// Phase 2: the held calls get their 503s, which open alpha's breaker.
	gateA.Release()
	for i, ch := range held {
		if res := resilRecv(t, ch, resilBound); res.err != nil || res.status != http.StatusServiceUnavailable {
			t.Fatalf("held alpha call %d: %v, want 503", i+1, res)
		}
	}
	if st := a.Status(); st.Breaker != observe.BreakerOpen {
		t.Fatalf("alpha breaker %s after %d failures, want open", st.Breaker, capA)
	}
	for i := range 50 {
		res := resilGet(a, "/orders", resilBound)
		if !errors.Is(res.err, ErrCircuitOpen) || !errors.Is(res.err, gobreaker.ErrOpenState) {
			t.Fatalf("alpha call %d with its breaker open: %v, want ErrCircuitOpen", i+1, res)
		}
		if e := resilAsError(t, res.err); e.System != "alpha" {
			t.Fatalf("error names %q, want alpha", e.System)
		}
	}
	checkB("alpha breaker open", base, runB("alpha breaker open"))

	// The servers saw only their own system's requests.
	if got := srvA.Requests(); got != capA {
		t.Errorf("alpha's server: %d requests, want %d", got, capA)
	}
	if got := srvA.Conns(); got > capA {
		t.Errorf("alpha's server: %d conns, want <= %d", got, capA)
	}
	if got := srvB.Requests(); got != int64(betaCalls) {
		t.Errorf("beta's server: %d requests, want %d (beta's calls only)", got, betaCalls)
	}
	if got := srvB.Conns(); got > 1+reusedConns(betaCalls) {
		t.Errorf("beta's server: %d conns for %d sequential calls, want 1 (%d on a loaded machine)", got, betaCalls, 1+reusedConns(betaCalls))
	}
	sa, sb := a.Status(), b.Status()
	if sb.Breaker != observe.BreakerClosed || sb.BreakerCounts.Failures != 0 || sb.InFlight != 0 ||
		sb.BulkheadRefused != 0 || sb.BreakerRefused != 0 || sb.GaveUp != 0 ||
		sb.Calls != uint64(betaCalls) || sb.OK != uint64(betaCalls) {
		t.Errorf("beta status not clean: %+v", sb)
	}
	if sa.Breaker != observe.BreakerOpen || sa.BreakerRefused != 50 || sa.BulkheadRefused != 20 || sa.InFlight != 0 {
		t.Errorf("alpha status: breaker %s, breaker rejected %d, bulkhead rejected %d, in flight %d; want open, 50, 20, 0",
			sa.Breaker, sa.BreakerRefused, sa.BulkheadRefused, sa.InFlight)
	}
	t.Logf("alpha server: %d requests, %d conns, max active %d; beta server: %d requests, %d conns",
		srvA.Requests(), srvA.Conns(), srvA.MaxInFlight(), srvB.Requests(), srvB.Conns())
}
