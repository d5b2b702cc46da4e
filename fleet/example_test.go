package fleet_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

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

// A fleet whose Redis does not answer starts degraded: calls still work,
// on the system's own breaker and a local share of its quota (the whole
// limit: a pod that never reached Redis knows of no other pod), and Sync
// says why. The fleet syncs by itself once Redis answers.
func Example_redisDown() {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "paid")
	}))
	defer up.Close()
	const redisURL = "redis://127.0.0.1:1" // nothing listens there
	f, err := fleet.New(context.Background(), fleet.Config{RedisURL: redisURL, Namespace: "shop"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	loaded, err := config.LoadEnv(map[string]string{
		"OUTBOUND_SYSTEMS":         "payments",
		"OUTBOUND_FLEET_REDIS_URL": redisURL, "OUTBOUND_FLEET_NAMESPACE": "shop",
		"PAYMENTS_BASE_URL": up.URL, "PAYMENTS_BREAKER_SCOPE": "fleet",
		"PAYMENTS_RATE_LIMIT": "100/s", "PAYMENTS_RATE_SCOPE": "fleet",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg, err := registry.New(loaded, f.Option())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	payments := reg.MustClient("payments")
	resp, err := payments.HTTPClient().Get("/pay")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	s := f.Sync()
	fmt.Println("synced:", s.Synced)
	fmt.Println("why:", s.LastError)
	r := payments.Status().Rate
	fmt.Printf("quota %s at scope %s: this pod may send %.0f/s (synced: %v)\n", r.Limit, r.Scope, r.Share, r.Synced)
	// Output:
	// 200 paid
	// synced: false
	// why: dial tcp 127.0.0.1:1: connect: connection refused
	// quota 100/s at scope fleet: this pod may send 100/s (synced: false)
}
