package statuspage_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// status.json shows each system's routes and the settings file's version,
// with a change it refused.
func TestStatusJSONShowsRoutesAndSettings(t *testing.T) {
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	path := filepath.Join(t.TempDir(), "settings")
	if err := os.WriteFile(path, []byte("INV_RETRIES=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OUTBOUND_SYSTEMS", "inv")
	t.Setenv("INV_BASE_URL", up.URL)
	t.Setenv("INV_ROUTES", "stock")
	t.Setenv("INV_ROUTE_STOCK_MATCH", "GET /stock/{id}")
	t.Setenv("INV_ROUTE_STOCK_BREAKER", "own")
	t.Setenv(config.FileVar, path)
	r, err := registry.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.WriteFile(path, []byte("INV_RETRIES=many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = r.Reload()
	res := serve(t, statuspage.Handler(r, nil), "GET", "/status.json")
	var snap statuspage.Snapshot
	if err := json.Unmarshal(res.Body.Bytes(), &snap); err != nil {
		t.Fatal(err)
	}
	if rs := snap.Systems[0].Routes; len(rs) != 1 || rs[0].Name != "stock" || !rs[0].OwnBreaker || rs[0].Breaker != "closed" {
		t.Errorf("routes %+v, want stock with its own closed breaker", rs)
	}
	if s := snap.Settings; s == nil || s.Version == "" || s.Refused == nil || s.Refused.Reason == "" {
		t.Errorf("settings %+v, want the version run and the refused change", s)
	}
}
