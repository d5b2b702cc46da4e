package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/registry"
)

// outbound_bulkhead_limit is the adaptive limit (ADAPTIVE_CONCURRENCY),
// which starts at the ceiling, or MAX_CONCURRENT for a fixed bulkhead.
func TestBulkheadLimitGauge(t *testing.T) {
	t.Setenv("OUTBOUND_SYSTEMS", "inv,pay")
	t.Setenv("INV_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("INV_MAX_CONCURRENT", "16")
	t.Setenv("INV_ADAPTIVE_CONCURRENCY", "true")
	t.Setenv("INV_MIN_CONCURRENT", "2")
	t.Setenv("PAY_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("PAY_MAX_CONCURRENT", "5")
	reg, err := registry.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	promReg := prometheus.NewPedanticRegistry()
	m := metrics.New(promReg)
	if err := m.Watch(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP outbound_bulkhead_limit Calls the bulkhead admits at once now: the adaptive limit (ADAPTIVE_CONCURRENCY), else MAX_CONCURRENT.
# TYPE outbound_bulkhead_limit gauge
outbound_bulkhead_limit{system="inv"} 16
outbound_bulkhead_limit{system="pay"} 5
`
	if err := promtest.GatherAndCompare(promReg, strings.NewReader(want), "outbound_bulkhead_limit"); err != nil {
		t.Error(err)
	}
}
