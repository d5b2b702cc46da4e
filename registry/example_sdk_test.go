package registry_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// Through HTTPClient, a call the breaker refuses is a made-up 503 that
// SDKs do not retry; Refusal reads the refusal back from its header.
func ExampleRefusal() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	d := config.Baseline()
	d.BaseURL, d.Retries, d.BreakerMinRequests = srv.URL, 0, 1 // one 503 opens the breaker
	reg, err := registry.FromEnv(config.System{Name: "payments", Defaults: d})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	hc := reg.MustClient("payments").HTTPClient()

	for range 2 {
		resp, err := hc.Get("/v1/balance")
		if err != nil {
			fmt.Println(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		refused := registry.Refusal(resp.Header)
		fmt.Println(resp.StatusCode, resp.Header.Get("X-Should-Retry"), resp.Header.Get(registry.RefusedHeader),
			errors.Is(refused, registry.ErrCircuitOpen))
	}
	// Output:
	// 503   false
	// 503 false breaker-open true
}
