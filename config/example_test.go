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
