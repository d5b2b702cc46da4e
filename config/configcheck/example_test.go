package configcheck_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/config/configcheck"
)

// A service checks its environment with the systems it declares in code:
// the 20s read of its code defaults makes CALL_TIMEOUT=15s invalid, which
// `outbound check` (baseline read 10s) would pass. In main, the same
// check is one line:
//
//	if len(os.Args) > 1 && os.Args[1] == "check-config" {
//		os.Exit(configcheck.Main(os.Args[2:], payments))
//	}
func ExampleCommand() {
	payments := config.System{Name: "payments", Defaults: config.Client{ReadTimeout: 20 * time.Second, CallTimeout: 30 * time.Second}}
	code := configcheck.Command{
		Name:    "bookstore check-config",
		Systems: []config.System{payments},
		Env:     map[string]string{"PAYMENTS_BASE_URL": "https://pay.internal", "PAYMENTS_CALL_TIMEOUT": "15s"},
		Stdout:  os.Stdout,
	}.Run(context.Background(), nil)
	fmt.Println("exit", code)
	// Output:
	// FAIL payments base=https://pay.internal connect=2s tls=3s read=20s call=15s max_concurrent=32 bulkhead_wait=0 retries=2 backoff=100ms..2s breaker=0.5/20 in 30s open 15s redirects=same-host
	//   PAYMENTS_CALL_TIMEOUT=15s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 23s; CONNECT_TIMEOUT = 2s, baseline default; READ_TIMEOUT = 20s, code default)
	// 1 system, 1 problem
	// exit 1
}
