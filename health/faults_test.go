package health_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/health"
	"github.com/outbound-go/outbound/registry"
)

// TestReadinessSaysWhichSystemsInjectFaults: during a drill /readyz
// names every system that injects faults and what, and stays ready;
// without one it says nothing of faults.
func TestReadinessSaysWhichSystemsInjectFaults(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		env := map[string]string{"OUTBOUND_SYSTEMS": "inv,pay", "INV_BASE_URL": "http://inv.internal", "PAY_BASE_URL": "http://pay.internal"}
		if on {
			env["OUTBOUND_FAULTS"] = "on"
			env["PAY_FAULT_ABORT_RATIO"] = "0.25"
			env["PAY_FAULT_ABORT_STATUS"] = "500"
		}
		loaded, err := config.LoadEnv(env)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := registry.New(loaded)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		health.Readiness(reg, health.CriticalSystems("pay")).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		_ = reg.Close()
		var rep health.Report
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		want := []string(nil)
		wantPay := ""
		if on {
			want, wantPay = []string{"pay: aborts 25% of attempts with 500"}, "aborts 25% of attempts with 500"
		}
		if rec.Code != http.StatusOK || !slices.Equal(rep.FaultInjection, want) || rep.Systems[1].Faults != wantPay || rep.Systems[0].Faults != "" {
			t.Errorf("faults on %v: %d %s", on, rec.Code, rec.Body)
		}
	}
}
