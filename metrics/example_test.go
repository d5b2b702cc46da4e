package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/registry"
)

// New registers the metrics; the registry reports to them as an
// observer, and Watch lets them read its Status at scrape time.
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	promReg := prometheus.NewRegistry()
	m := metrics.New(promReg)
	reg, err := registry.FromEnvWith([]config.System{{Name: "inventory", Defaults: config.Client{BaseURL: srv.URL}}},
		registry.WithObserver(m))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	if err := m.Watch(reg); err != nil {
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/stock/42", nil)
	if resp, err := reg.MustClient("inventory").Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	const want = `
# HELP outbound_breaker_state Circuit breaker state: 0 closed, 1 half-open, 2 open.
# TYPE outbound_breaker_state gauge
outbound_breaker_state{system="inventory"} 0
`
	fmt.Println(testutil.GatherAndCompare(promReg, strings.NewReader(want), "outbound_breaker_state"))
	families, _ := promReg.Gather()
	for _, f := range families {
		if f.GetName() != "outbound_calls_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			if v := mt.GetCounter().GetValue(); v > 0 {
				for _, l := range mt.GetLabel() {
					fmt.Printf("%s=%s ", l.GetName(), l.GetValue())
				}
				fmt.Println(v)
			}
		}
	}
	// Output:
	// <nil>
	// outcome=ok status_class=2xx system=inventory 1
}
