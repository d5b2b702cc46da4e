package adapters_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

func ExampleGetJSON() {
	// A fake inventory API: one book in stock, every other ISBN unknown.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stock/9780441172719" {
			http.Error(w, "unknown isbn", http.StatusNotFound)
			return
		}
		fmt.Fprint(w, `{"isbn":"9780441172719","available":12}`)
	}))
	defer srv.Close()

	// A service would call registry.FromEnv(inventory.System); the
	// example declares the system in code to stay off the environment.
	loaded, err := config.LoadCode(config.System{Name: "inventory", Defaults: config.Client{BaseURL: srv.URL}})
	if err != nil {
		panic(err)
	}
	reg, err := registry.New(loaded)
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	inv := reg.MustClient("inventory")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var s struct {
		ISBN      string `json:"isbn"`
		Available int    `json:"available"`
	}
	err = adapters.GetJSON(ctx, inv, []string{"stock", "9780441172719"}, &s)
	fmt.Println(s.Available, err)

	err = adapters.GetJSON(ctx, inv, []string{"stock", "978/0"}, &s)
	fmt.Println(errors.Is(err, adapters.ErrNotFound), adapters.Degradable(err))
	// Output:
	// 12 <nil>
	// true false
}
