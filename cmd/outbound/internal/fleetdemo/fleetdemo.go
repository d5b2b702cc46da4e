// Package fleetdemo is `outbound demo --fleet`: three pods of one service
// (three registries in one process) call a flaky payments fake, their
// payments breakers shared over a redis-server of the demo's own
// (loopback, persistence off), and the demo shows them tripping
// together.
package fleetdemo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/outbound-go/outbound/cmd/outbound/internal/loopback"
)

// numPods is how many registries stand for the pods of one service.
const numPods = 3

// errNoRedis says how to get the redis-server the fleet demo needs.
var errNoRedis = errors.New("needs redis-server on the PATH, and starts its own on a free\n" +
	"loopback port with persistence off. Install it with: apt-get install redis-server\n" +
	"(Debian, Ubuntu), dnf install redis (Fedora), brew install redis (macOS)")

// Options are the fleet demo's flags.
type Options struct {
	Duration   time.Duration // how long the pods call the fake
	StatusAddr string        // loopback address of the pods' status pages; empty: none
}

// Run runs the fleet demo until o.Duration passes or ctx ends, writing
// what it sees to stdout. It fails when it cannot start: no
// redis-server, a port it cannot take.
func Run(ctx context.Context, o Options, stdout io.Writer) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return errNoRedis
	}
	rs, err := startRedis(bin)
	if err != nil {
		return err
	}
	defer rs.stop()
	up, err := startUpstream()
	if err != nil {
		return err
	}
	defer up.stop()
	pods, err := startPods(ctx, fleetEnv(up.url, rs.addr))
	if err != nil {
		return err
	}
	defer pods.close()
	statusURL := ""
	if o.StatusAddr != "" {
		srv, err := loopback.Serve(o.StatusAddr, pods.statusPages())
		if err != nil {
			return fmt.Errorf("status page: %w", err)
		}
		defer srv.Stop()
		statusURL = srv.URL
	}
	writeHeader(stdout, rs.addr, statusURL)
	(&watcher{out: stdout, pods: pods, up: up}).drive(ctx, o.Duration)
	return nil
}

// drive makes every pod call the fake for d, or until ctx ends, watching
// their breakers, and ends with how many storms tripped the fleet
// together.
func (w *watcher) drive(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	paying := w.pods.pay(ctx)
	w.watch(ctx)
	paying.Wait()
	fmt.Fprintf(w.out, "\n%d storms tripped the fleet together; the fake saw %d calls in all.\n", w.trips, w.up.hits.Load())
}

// writeHeader says what runs: the pods, the fake's rhythm, the breaker's
// settings and the status pages.
func writeHeader(w io.Writer, redisAddr, statusURL string) {
	fmt.Fprintf(w, "outbound demo --fleet: %d pods share the payments breaker over redis-server %s\n", numPods, redisAddr)
	fmt.Fprintf(w, "payments fake: healthy for %v, then 503s for %v, in turns; each pod calls every 10-30ms\n", stormLength, stormLength)
	fmt.Fprintln(w, "breaker: MIN_REQUESTS=10, WINDOW=1s, OPEN_TIMEOUT=2s, HALF_OPEN_PROBES=1 (one probe in the whole fleet)")
	if statusURL != "" {
		fmt.Fprintf(w, "status pages: %spod-1/ %spod-2/ %spod-3/\n", statusURL, statusURL, statusURL)
	}
	fmt.Fprintln(w)
}
