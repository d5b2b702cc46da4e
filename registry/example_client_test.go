package registry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// New builds a registry from settings already loaded: here from a map
// standing for the environment, as a test or a check would.
func ExampleNew() {
	loaded, err := config.LoadEnv(map[string]string{
		"OUTBOUND_SYSTEMS":   "payments,inventory",
		"PAYMENTS_BASE_URL":  "https://payments.internal/v1",
		"INVENTORY_BASE_URL": "http://inventory.internal",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg, err := registry.New(loaded)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	fmt.Println(reg.Names())
	// Output: [payments inventory]
}

// Client looks a system up by name; an undeclared name is an error that
// lists the known ones.
func ExampleRegistry_Client() {
	reg, err := registry.FromEnv(config.System{Name: "inventory", Defaults: config.Client{BaseURL: "http://inventory.internal"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	_, err = reg.Client("invetory")
	fmt.Println(errors.Is(err, registry.ErrUnknownSystem))
	fmt.Println(err)
	// Output:
	// true
	// outbound: unknown system "invetory" (known: inventory)
}

// HTTPClient gives any library that takes an *http.Client the whole
// pipeline; a refusal reaches it as a 503 that says why, which Refusal
// turns back into the error Do would have returned.
func ExampleClient_HTTPClient() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"id":"ch_1"}`)
	}))
	defer srv.Close()
	reg, err := registry.FromEnv(config.System{Name: "payments", Defaults: config.Client{BaseURL: srv.URL}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	payments := reg.MustClient("payments")
	hc := payments.HTTPClient() // hand this to an SDK

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	get := func() *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/v1/charges/ch_1", nil)
		resp, err := hc.Do(req)
		if err != nil {
			fmt.Println(err)
			return nil
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp
	}
	fmt.Println(get().StatusCode)
	_ = payments.Force(observe.BreakerOpen, time.Minute) // an operator isolates the system
	resp := get()
	fmt.Println(resp.StatusCode, resp.Header.Get(registry.RefusedHeader), resp.Header.Get("X-Should-Retry"))
	fmt.Println(errors.Is(registry.Refusal(resp.Header), registry.ErrCircuitOpen))
	// Output:
	// 200
	// 503 forced-open false
	// true
}

// Force lets an operator isolate a failing partner (open) or ignore the
// breaker's judgement (closed) for a while; the override ends by itself
// unless renewed, and Status says it holds.
func ExampleClient_Force() {
	reg, err := registry.FromEnv(config.System{Name: "partner", Defaults: config.Client{BaseURL: "https://partner.example"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	partner := reg.MustClient("partner")
	if err := partner.Force(observe.BreakerOpen, 15*time.Minute); err != nil {
		fmt.Println(err)
		return
	}
	st := partner.Status()
	fmt.Println(st.Breaker, st.Forced.State)
	req, _ := http.NewRequest(http.MethodGet, "/orders", nil)
	_, err = partner.Do(req)
	fmt.Println(err)
	_ = partner.Force("", 0) // back to the breaker's own judgement
	fmt.Println(partner.Status().Forced == nil)
	// Output:
	// open open
	// outbound partner: forced open: an operator forced the breaker open
	// true
}
