package registry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// A system declared in code (its BASE_URL would normally come from
// INVENTORY_BASE_URL), called with a path relative to BASE_URL under the
// caller's deadline.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s: 7 in stock", r.URL.Path)
	}))
	defer srv.Close()

	reg, err := registry.FromEnv(config.System{
		Name:     "inventory",
		Defaults: config.Client{BaseURL: srv.URL + "/v1"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "stock/42", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := reg.MustClient("inventory").Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 /v1/stock/42: 7 in stock
}
