package config_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/outbound-go/outbound/config"
)

func ExampleLoad() {
	env := map[string]string{
		"PAYMENTS_BASE_URL":        "https://user:s3cret@payments.internal:8443/v1",
		"PAYMENTS_CONNECT_TIMEOUT": "2s",
		"PAYMENTS_READ_TIMEOUT":    "5s",
		"PAYMENTS_CALL_TIMEOUT":    "3s", // too short for connect + read
	}
	for k, v := range env {
		os.Setenv(k, v)
	}
	defer func() {
		for k := range env {
			os.Unsetenv(k)
		}
	}()

	systems, err := config.Load(config.System{Name: "payments"})
	fmt.Println(err)
	fmt.Println(errors.Is(err, config.ErrInvalid))
	// The systems are returned with the error, secrets redacted.
	fmt.Println(systems[0].Summary())
	// Output:
	// outbound config: 1 problem
	//   PAYMENTS_CALL_TIMEOUT=3s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 8s; CONNECT_TIMEOUT = 2s, env; READ_TIMEOUT = 5s, env)
	// true
	// payments base=https://REDACTED@payments.internal:8443/v1 connect=2s tls=3s read=5s call=3s max_concurrent=32 bulkhead_wait=0 retries=2 backoff=100ms..2s breaker=0.5/20 in 30s open 15s redirects=same-host
}

// LoadEnv loads from a map instead of the process environment: what a
// check, a test or a generated manifest uses.
func ExampleLoadEnv() {
	systems, err := config.LoadEnv(map[string]string{
		"OUTBOUND_SYSTEMS":     "inventory",
		"INVENTORY_BASE_URL":   "http://inventory.internal",
		"INVENTORY_RATE_LIMIT": "6000/m",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := systems[0].Client
	fmt.Println(systems[0].Name, c.CallTimeout, c.MaxConcurrent)
	// Output: inventory 15s 32
}

// Rate reads RATE_LIMIT with its effective burst: 6000/m is 100 a
// second, and a RATE_BURST of 0 derives 50 ms worth of it.
func ExampleClient_Rate() {
	c := config.Baseline()
	c.RateLimit = "6000/m"
	r := c.Rate()
	fmt.Println(r, r.PerSecond(), r.Burst)
	// Output: 6000/m 100 5
}
