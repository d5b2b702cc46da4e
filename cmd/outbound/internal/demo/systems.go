package demo

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/cmd/outbound/internal/fakes"
	"github.com/outbound-go/outbound/config"
)

// systems declares the demo's systems, pointed at the fakes. inventory
// and payments keep their adapters' code defaults; timings that would take
// minutes to show anything are shortened, with the reason.
func systems(u *fakes.Upstreams) []config.System {
	inv := inventory.System
	inv.Defaults.BaseURL = u.URL(fakes.Inventory)

	catalog := config.System{Name: fakes.Catalog, Defaults: config.Client{
		BaseURL: u.URL(fakes.Catalog),
		// The fake answers in 200-800ms: a 700ms read timeout cuts the
		// slowest sixth, and one retry usually lands a faster answer.
		ConnectTimeout:      200 * time.Millisecond,
		TLSHandshakeTimeout: 500 * time.Millisecond,
		ReadTimeout:         700 * time.Millisecond,
		CallTimeout:         2 * time.Second,
		Retries:             1,
	}}

	pay := payments.System
	pay.Defaults.BaseURL = u.URL(fakes.Payments)
	// The fake's 503 storms last 3s: a 5s window and a 2s open time let
	// the breaker open during a storm and close after it, within the
	// demo. Production keeps the baseline (30s window, 15s open).
	pay.Defaults.BreakerMinRequests = 10
	pay.Defaults.BreakerWindow = 5 * time.Second
	pay.Defaults.BreakerOpenTimeout = 2 * time.Second

	return []config.System{inv, catalog, pay, shippingSystem(u)}
}

// shippingSystem is shipping, whose fake never answers: a 300ms read
// timeout ends each wait, four failed attempts open the breaker, and
// every 3s one probe checks whether it came back. Two slots in flight
// show the bulkhead shedding while they hang.
func shippingSystem(u *fakes.Upstreams) config.System {
	return config.System{Name: fakes.Shipping, Defaults: config.Client{
		BaseURL:               u.URL(fakes.Shipping),
		ConnectTimeout:        100 * time.Millisecond,
		TLSHandshakeTimeout:   300 * time.Millisecond,
		ReadTimeout:           300 * time.Millisecond,
		CallTimeout:           1500 * time.Millisecond,
		Retries:               1,
		MaxConcurrent:         2,
		BreakerMinRequests:    4,
		BreakerWindow:         10 * time.Second,
		BreakerOpenTimeout:    3 * time.Second,
		BreakerHalfOpenProbes: 1,
	}}
}

// load validates the demo's systems with config.Load, which also applies
// the INVENTORY_*, CATALOG_*, PAYMENTS_* and SHIPPING_* variables of the
// environment, if any, so the demo can be tuned; notes say which it used.
// A BASE_URL from the environment is ignored: the demo talks to its own
// fakes only. Systems declared in OUTBOUND_SYSTEMS are not the demo's and
// are left out, with their problems.
func load(declared []config.System, u *fakes.Upstreams) (_ []config.Loaded, notes []string, _ error) {
	names := make([]string, len(declared))
	for i, s := range declared {
		names[i] = s.Name
	}
	all, err := config.Load(declared...)
	if err := problemsOf(err, names); err != nil {
		return nil, nil, err
	}
	var out []config.Loaded
	for _, l := range all {
		if !slices.Contains(names, l.Name) {
			continue
		}
		notes = append(notes, envNotes(l)...)
		l.Client.BaseURL = u.URL(l.Name)
		l, err := config.Revalidate(l)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, l)
	}
	return out, notes, nil
}

// problemsOf returns the error of config.Load as far as it concerns the
// named systems, or nil when the environment has no problem with them.
func problemsOf(err error, names []string) error {
	var cerr *config.Error
	if err == nil {
		return nil
	}
	if !errors.As(err, &cerr) {
		return err
	}
	var mine []string
	for _, p := range cerr.Problems {
		if slices.Contains(names, p.System) {
			mine = append(mine, "  "+p.Error())
		}
	}
	if len(mine) == 0 {
		return nil
	}
	prefixes := make([]string, len(names))
	for i, n := range names {
		prefixes[i] = config.Prefix(n)
	}
	return fmt.Errorf("the environment tunes the demo's systems with %s:\n%s\n"+
		"fix or unset them (the demo reads %s_* to let you tune it)",
		plural(len(mine), "problem"), strings.Join(mine, "\n"), strings.Join(prefixes, "_*, "))
}

// envNotes says which variables of the environment tune l.
func envNotes(l config.Loaded) []string {
	var notes []string
	for _, v := range l.Vars() {
		switch {
		case v.Source != config.FromEnv.String():
		case v.Setting == "BaseURL":
			notes = append(notes, fmt.Sprintf("ignoring %s from the environment: the demo talks to its own fakes only", v.Name))
		default:
			notes = append(notes, fmt.Sprintf("using %s=%s from the environment", v.Name, v.Value))
		}
	}
	return notes
}

// plural returns "1 problem", "2 problems".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
