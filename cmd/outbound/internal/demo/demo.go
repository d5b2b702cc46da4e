// Package demo is `outbound demo`, the project's main job: four fake
// upstreams on 127.0.0.1 (package fakes), a registry built for them in
// code, a bounded load driven through it, a live table every second and,
// at the end, a summary of what tripped, what was shed and what stayed
// fast (packages stats and view). The registry's status page, its
// Prometheus metrics and its health probes are served on a loopback
// address (package loopback) while it runs. With --fleet it runs
// package fleetdemo instead.
package demo

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/outbound-go/outbound/cmd/outbound/internal/fleetdemo"
	"github.com/outbound-go/outbound/cmd/outbound/internal/loopback"
	"github.com/outbound-go/outbound/internal/checkcmd"
)

// Exit codes of Run, as the command's.
const (
	exitOK     = 0
	exitFailed = 1 // the demo could not start
	exitUsage  = 2
)

// defaultStatusAddr is where the status page goes unless told otherwise.
const defaultStatusAddr = "127.0.0.1:8089"

const synopsis = "[--duration D] [--workers N] [--plain] [--status-addr ADDR] [--fleet]"

const about = "Starts four fake upstreams on 127.0.0.1 (inventory: healthy; catalog: slow;\n" +
	"payments: 503 storms and 429s; shipping: never answers), builds a registry\n" +
	"for them in code, drives a bounded load through it and shows, every second,\n" +
	"each system's calls, retries, breaker, bulkhead and latency; then explains\n" +
	"what tripped, what was shed and what stayed fast. The live status page of\n" +
	"the registry (package statuspage), its Prometheus /metrics and the /healthz\n" +
	"and /readyz probes are served on --status-addr, loopback only.\n" +
	"No environment is needed: INVENTORY_*, CATALOG_*, PAYMENTS_* and SHIPPING_*\n" +
	"variables, if set, tune the systems (BASE_URL excepted: the demo only talks\n" +
	"to its own fakes).\n" +
	"It stops by itself after --duration, or at Ctrl-C."

// options are the demo's flags.
type options struct {
	duration   time.Duration
	workers    int
	plain      bool
	statusAddr string
	fleet      bool
}

// Run runs `outbound demo` with args, the arguments after "demo", and
// returns its exit code: 0 after a run (or -h), 1 when the demo cannot
// start (a bad environment, a port, no redis-server for --fleet), 2 on a
// bad flag.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseArgs(args, stderr)
	if !ok {
		return code
	}
	if o.fleet {
		err := fleetdemo.Run(ctx, fleetdemo.Options{Duration: o.duration, StatusAddr: o.statusAddr}, stdout)
		return exitCode(stderr, "outbound demo --fleet", err)
	}
	return exitCode(stderr, "outbound demo", runScenario(ctx, o, stdout))
}

// exitCode reports err, if any, on stderr under the command's name, and
// returns the exit code it calls for.
func exitCode(stderr io.Writer, name string, err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return exitFailed
}

// parseArgs parses and checks the flags; when it returns false Run
// returns code.
func parseArgs(args []string, stderr io.Writer) (_ options, code int, ok bool) {
	fs := flag.NewFlagSet("outbound demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: outbound demo %s\n\n%s\n\nFlags:\n", synopsis, about)
		fs.PrintDefaults()
	}
	var o options
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "how long to drive the load")
	fs.IntVar(&o.workers, "workers", 16, "concurrent workers, spread over the four systems (0: serve the fakes only)")
	fs.BoolVar(&o.plain, "plain", false, "append plain lines instead of redrawing the screen")
	fs.StringVar(&o.statusAddr, "status-addr", defaultStatusAddr, "loopback `ADDR` of the live status page (a busy port falls back to a free one); empty: none")
	fs.BoolVar(&o.fleet, "fleet", false, "three pods share the payments breaker over a redis-server the demo starts (needs redis-server on the PATH)")
	if code, ok := checkcmd.ParseFlags(fs, args); !ok {
		return o, code, false
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "outbound demo: %v\n", err)
		return o, exitUsage, false
	}
	return o, exitOK, true
}

// check refuses flags out of range and a status address off loopback.
func (o options) check() error {
	switch {
	case o.duration <= 0:
		return fmt.Errorf("--duration must be > 0")
	case o.workers < 0 || o.workers > 1024:
		return fmt.Errorf("--workers must be 0..1024")
	}
	if o.statusAddr != "" {
		if err := loopback.Check(o.statusAddr); err != nil {
			return fmt.Errorf("--status-addr %q: %w", o.statusAddr, err)
		}
	}
	return nil
}
