package registry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// A drill: every attempt to payments is aborted with a 503 before it
// reaches the upstream. The guard (OUTBOUND_FAULTS=on) must be set, or
// the load fails naming PAYMENTS_FAULT_ABORT_RATIO. The retries run on
// the made-up 503s, and the caller gets the last one, marked.
func ExampleWithFaultSeed() {
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
	}))
	defer srv.Close()

	env := map[string]string{
		"PAYMENTS_BASE_URL":          srv.URL,
		"PAYMENTS_BACKOFF_BASE":      "1ms",
		"PAYMENTS_FAULT_ABORT_RATIO": "1",
	}
	if _, err := config.LoadEnv(env, config.System{Name: "payments"}); err != nil {
		fmt.Println(err)
	}

	env[config.FaultsVar] = "on"
	loaded, err := config.LoadEnv(env, config.System{Name: "payments"})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg, err := registry.New(loaded, registry.WithFaultSeed(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	c := reg.MustClient("payments")
	fmt.Println(c.Status().Faults)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/balance", nil)
	resp, err := c.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	st := c.Status()
	fmt.Printf("%d %s=%s %q\n", resp.StatusCode, "X-Outbound-Fault", resp.Header.Get("X-Outbound-Fault"), body)
	fmt.Printf("injected aborts %d, retries %d, upstream reached %d times\n", st.InjectedAborts, st.Retries, reached.Load())
	// Output:
	// outbound config: 1 problem
	//   PAYMENTS_FAULT_ABORT_RATIO=1: fault injection is off: set OUTBOUND_FAULTS=on to allow it
	// aborts 100% of attempts with 503
	// 503 X-Outbound-Fault=abort "outbound: injected abort (PAYMENTS_FAULT_ABORT_RATIO)\n"
	// injected aborts 3, retries 2, upstream reached 0 times
}
