package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/registry"
)

// TestInjectedAttemptsCountedApart: in a drill, the attempts fault
// injection aborted are in outbound_injected_attempts_total{injected="true"}
// and not in the upstream's attempt, retry and duration series.
func TestInjectedAttemptsCountedApart(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	loaded, err := config.LoadEnv(map[string]string{
		"OUTBOUND_FAULTS": "on", "OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": srv.URL,
		"INV_RETRIES": "1", "INV_BACKOFF_BASE": "1ms", "INV_BACKOFF_MAX": "2ms",
		"INV_FAULT_ABORT_RATIO": "1",
	})
	if err != nil {
		t.Fatal(err)
	}
	promReg := prometheus.NewPedanticRegistry()
	m := metrics.New(promReg)
	r, err := registry.New(loaded, registry.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := m.Watch(r); err != nil {
		t.Fatal(err)
	}
	if status, err := get(context.Background(), r.MustClient("inv"), "/ok"); err != nil || status != 503 {
		t.Fatalf("status %d, err %v; want the injected 503", status, err)
	}
	want := `
# HELP outbound_injected_attempts_total Drills (OUTBOUND_FAULTS=on): attempts fault injection aborted or delayed, by outcome. They are counted here only, not in outbound_attempts_total, outbound_retries_total nor the attempt duration histogram.
# TYPE outbound_injected_attempts_total counter
outbound_injected_attempts_total{injected="true",outcome="gave_up",system="inv"} 1
outbound_injected_attempts_total{injected="true",outcome="retry",system="inv"} 1
# HELP outbound_retries_total Retries sent to the upstream: attempts after the first of their call.
# TYPE outbound_retries_total counter
outbound_retries_total{system="inv"} 0
`
	if err := promtest.GatherAndCompare(promReg, strings.NewReader(want), "outbound_injected_attempts_total", "outbound_retries_total"); err != nil {
		t.Error(err)
	}
	mfs, err := promReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			switch mf.GetName() {
			case "outbound_attempts_total":
				if v := mt.GetCounter().GetValue(); v != 0 {
					t.Errorf("outbound_attempts_total %v = %v, want 0: an injected attempt counted as the upstream's", mt.GetLabel(), v)
				}
			case "outbound_attempt_duration_seconds":
				if n := mt.GetHistogram().GetSampleCount(); n != 0 {
					t.Errorf("attempt duration has %d samples, want 0", n)
				}
			}
		}
	}
}
