package metrics_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// A declared route is a label of the route series, and its own breaker a
// gauge; a call that matches no route is in the system's series only.
func TestRoutesAreLabelsOfTheirOwnSeries(t *testing.T) {
	up, _ := upstream(t)
	m := metrics.New(nil)
	r := registrytest.New(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": up.URL,
		"INV_ROUTES": "stock", "INV_ROUTE_STOCK_MATCH": "GET /stock/{id}", "INV_ROUTE_STOCK_BREAKER": "own",
	}, registrytest.With(registry.WithObserver(m)))
	if err := m.Watch(r); err != nil {
		t.Fatal(err)
	}
	inv := r.MustClient("inv")
	for range 3 {
		_, _ = get(context.Background(), inv, "/stock/42")
	}
	_, _ = get(context.Background(), inv, "/other")
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	routeCalls, breaker := 0.0, -1.0
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "outbound_route_calls_total":
				if label(s, "route") != "stock" || label(s, "system") != "inv" {
					t.Errorf("route series with labels %v", s.GetLabel())
				}
				routeCalls += s.GetCounter().GetValue()
			case "outbound_route_breaker_state":
				breaker = s.GetGauge().GetValue()
			}
		}
	}
	if routeCalls != 3 || breaker != 0 {
		t.Errorf("route calls %v, route breaker %v; want 3 and 0 (closed)", routeCalls, breaker)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// The version of the settings file a pod runs is a label, with the count
// of changes refused.
func TestSettingsFileVersionIsALabel(t *testing.T) {
	up, _ := upstream(t)
	path := filepath.Join(t.TempDir(), "settings")
	if err := os.WriteFile(path, []byte("INV_RETRIES=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OUTBOUND_SYSTEMS", "inv")
	t.Setenv("INV_BASE_URL", up.URL)
	t.Setenv(config.FileVar, path)
	m := metrics.New(nil)
	r, err := registry.FromEnvWith(nil, registry.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := m.Watch(r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("INV_RETRIES=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = r.Reload()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	version, refused := "", -1.0
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "outbound_config_info":
				if label(s, "refused") == "1" {
					version = label(s, "version")
				}
			case "outbound_config_changes_refused_total":
				refused = s.GetCounter().GetValue()
			}
		}
	}
	if version != r.Settings().Version || version == "" || refused != 1 {
		t.Errorf("config info version %q (want %q, refused), refused total %v (want 1)", version, r.Settings().Version, refused)
	}
}
