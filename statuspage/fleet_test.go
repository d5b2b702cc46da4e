package statuspage_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// degraded is a fleet's breaker whose Redis is gone.
type degraded struct{ registry.LocalBreaker }

func (degraded) LocalChanged(from, to observe.BreakerState)  {}
func (degraded) Force(observe.BreakerState, time.Time) error { return errors.New("no redis") }
func (degraded) Forced() (observe.BreakerState, time.Time)   { return "", time.Time{} }
func (degraded) SetRule(ratio float64, minRequests int)      {}

func (degraded) FleetSync() observe.FleetSync {
	return observe.FleetSync{Since: time.Unix(1700000000, 0).UTC(), LastError: "dial tcp: connection refused"}
}

// status.json shows the fleet sync state of a system at
// BREAKER_SCOPE=fleet, and none for one at scope local; the page renders
// it under the breaker's badge.
func TestStatusJSONFleet(t *testing.T) {
	loaded, err := config.LoadEnv(map[string]string{
		"OUTBOUND_SYSTEMS": "inv,pay", "INV_BASE_URL": "http://127.0.0.1:1", "PAY_BASE_URL": "http://127.0.0.1:1",
		"PAY_BREAKER_SCOPE": "fleet", "OUTBOUND_FLEET_REDIS_URL": "redis://127.0.0.1:1", "OUTBOUND_FLEET_NAMESPACE": "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := registry.New(loaded, registry.WithFleet(degradedFleet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res := serve(t, statuspage.Handler(r, nil), "GET", "/status.json")
	var snap struct {
		Systems []struct {
			System string             `json:"system"`
			Fleet  *observe.FleetSync `json:"fleet"`
		} `json:"systems"`
	}
	if err := json.Unmarshal(res.Body.Bytes(), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Systems) != 2 || snap.Systems[0].Fleet != nil {
		t.Fatalf("inv (scope local): %+v, want no fleet", snap.Systems)
	}
	if f := snap.Systems[1].Fleet; f == nil || f.Synced || f.LastError != "dial tcp: connection refused" {
		t.Errorf("pay (scope fleet): fleet %+v, want degraded with its error", f)
	}
	page := serve(t, statuspage.Handler(r, nil), "GET", "/").Body.String()
	if !strings.Contains(page, "fleet degraded for") {
		t.Error("the page does not render the fleet sync state")
	}
}

// degradedFleet gives every system at BREAKER_SCOPE=fleet a degraded
// shared breaker, and no quota.
type degradedFleet struct {
	registry.Fleet // asked for nothing: a registry asks a BreakerFleet for SharedBreakers
}

func (degradedFleet) SharedBreaker(_ registry.FleetSystem, local registry.LocalBreaker) (registry.SharedBreaker, error) {
	return degraded{local}, nil
}
