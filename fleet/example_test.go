package fleet_test

import (
	"context"
	"log"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/registry"
)

// A service wires the fleet from OUTBOUND_FLEET_REDIS_URL and
// OUTBOUND_FLEET_NAMESPACE; systems with BREAKER_SCOPE=fleet then share
// their breaker with every pod. (Not run: it needs a Redis.)
func Example() {
	ctx := context.Background()
	f, err := fleet.FromEnv(ctx) // nil, nil when OUTBOUND_FLEET_REDIS_URL is unset
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close() // after the registry's Close (deferred below)
	reg, err := registry.FromEnvWith([]config.System{{Name: "payments"}}, f.Option())
	if err != nil {
		log.Fatal(err) // a problem of any variable, or scope fleet without a fleet
	}
	defer reg.Close()
	_ = reg.MustClient("payments") // calls never wait on Redis
}
