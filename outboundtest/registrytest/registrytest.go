// Package registrytest builds a registry for a test from an in-code map of
// variables, closes it at the end of the test and checks that the test left
// its pipeline clean. With no process environment involved, tests that use
// it can run with t.Parallel.
//
//	up := outboundtest.NewUpstream(t, outboundtest.Storm(2))
//	reg := registrytest.New(t, map[string]string{
//		"OUTBOUND_SYSTEMS":   "inventory",
//		"INVENTORY_BASE_URL": up.URL,
//	}, registrytest.Watch(up))
//
// It lives apart from [outboundtest] because it imports registry, and
// outbound's own registry tests use outboundtest's upstreams.
package registrytest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// Option configures [New]: systems declared in code, registry options, the
// upstreams whose connections to check.
type Option interface{ apply(*options) }

type options struct {
	systems []config.System
	reg     []registry.Option
	watch   []*outboundtest.Upstream
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// Systems declares systems in code, with their defaults, as
// registry.FromEnv does (an adapter's inventory.System); OUTBOUND_SYSTEMS
// in the map declares more.
func Systems(s ...config.System) Option {
	return optionFunc(func(o *options) { o.systems = append(o.systems, s...) })
}

// With passes options to registry.New: an observer, a logger, a transport
// wrapper.
func With(opts ...registry.Option) Option {
	return optionFunc(func(o *options) { o.reg = append(o.reg, opts...) })
}

// Watch makes the end-of-test check also wait for every connection to ups
// to close (see [CheckClean]).
func Watch(ups ...*outboundtest.Upstream) Option {
	return optionFunc(func(o *options) { o.watch = append(o.watch, ups...) })
}

// New loads the systems from env (config.LoadEnv, never the process
// environment), builds a registry and returns it. A map with any problem
// fails the test at once with the config report, which names every bad
// variable. In t.Cleanup it runs [CheckClean], which closes the registry.
func New(t testing.TB, env map[string]string, opts ...Option) *registry.Registry {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	loaded, err := config.LoadEnv(env, o.systems...)
	if err != nil {
		t.Fatalf("registrytest: the variables do not load:\n%v", err)
	}
	reg, err := registry.New(loaded, o.reg...)
	if err != nil {
		t.Fatalf("registrytest: the registry does not build:\n%v", err)
	}
	t.Cleanup(func() { CheckClean(t, reg, o.watch...) })
	return reg
}

// settle is how long CheckClean waits for what ends asynchronously: a
// permit released by a deadline's timer, a connection the server has not
// yet seen closed.
const settle = 2 * time.Second

// CheckClean reports, as test errors, what a test left in reg's pipeline,
// then closes reg. Call it at the end of a test, or let [New] do it.
//
//   - No permit held and no call in flight, on any system
//     (observe.Status's InFlight: a call holds its bulkhead permit until
//     its body is closed or its deadline passes).
//   - Once reg is closed (its idle connections with it), no connection
//     left open to any of ups: one still open is a response body not
//     closed, or a client other than reg that kept its connections.
//
// Both are waited for a moment (a deadline's timer, the server noticing a
// close) before they count. CheckClean is safe to call more than once.
func CheckClean(t testing.TB, reg *registry.Registry, ups ...*outboundtest.Upstream) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		var held []string
		for _, st := range reg.Status() {
			if st.InFlight != 0 {
				held = append(held, fmt.Sprintf("%s: %d permits held (calls in flight)", st.System, st.InFlight))
			}
		}
		if len(held) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("registrytest: the pipeline is not clean at the end of the test (a response body not closed?):\n\t%s", strings.Join(held, "\n\t"))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = reg.Close()
	for _, up := range ups {
		for up.OpenConns() != 0 {
			if time.Now().After(deadline) {
				t.Errorf("registrytest: %d connections to %s still open after the registry closed", up.OpenConns(), up.URL)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
