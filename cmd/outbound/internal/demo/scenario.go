package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/outbound-go/outbound/cmd/outbound/internal/fakes"
	"github.com/outbound-go/outbound/cmd/outbound/internal/loopback"
	"github.com/outbound-go/outbound/cmd/outbound/internal/stats"
	"github.com/outbound-go/outbound/cmd/outbound/internal/view"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/health"
	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// scenario is one run of the demo: the fakes, the registry built for
// them, what its observers count, and the status server.
type scenario struct {
	opts   options
	start  time.Time
	fakes  *fakes.Upstreams
	loaded []config.Loaded
	notes  []string // what the environment changed, and where the status page went
	stats  *stats.Collector
	reg    *registry.Registry
	calls  map[string]callFunc
	status *loopback.Server // nil without --status-addr
}

// runScenario runs the demo on the fakes for o.duration, or until ctx
// ends, and ends with the summary.
func runScenario(ctx context.Context, o options, stdout io.Writer) error {
	sc, err := startScenario(o)
	if err != nil {
		return err
	}
	defer sc.close()
	scr := &screen{w: stdout, head: sc.header(), ansi: !o.plain && isTerminal(stdout)}
	if !scr.ansi {
		_, _ = io.WriteString(stdout, scr.head)
	}
	stopped := sc.drive(ctx, scr)
	view.Summary{Snaps: sc.snapshots(false), Elapsed: time.Since(sc.start), Workers: o.workers, Stopped: stopped}.Write(stdout)
	return nil
}

// startScenario starts the fakes, loads the systems, builds the registry
// and serves its status page.
func startScenario(o options) (*scenario, error) {
	u, err := fakes.Start()
	if err != nil {
		return nil, err
	}
	sc := &scenario{opts: o, start: time.Now(), fakes: u}
	if sc.loaded, sc.notes, err = load(systems(u), u); err != nil {
		sc.close()
		return nil, err
	}
	sc.stats = stats.NewCollector(sc.start, fakes.Names())
	rec := statuspage.NewRecorder()     // the status page's latencies, last errors, breaker changes
	promReg := prometheus.NewRegistry() // the demo's own: /metrics shows outbound's series only
	if err := sc.build(rec, promReg); err != nil {
		sc.close()
		return nil, err
	}
	if o.statusAddr != "" {
		if sc.status, err = loopback.Serve(o.statusAddr, statusMux(sc.reg, rec, promReg)); err != nil {
			sc.close()
			return nil, fmt.Errorf("status page: %w", err)
		}
		if sc.status.Note != "" {
			sc.notes = append(sc.notes, sc.status.Note)
		}
	}
	return sc, nil
}

// build builds the registry, observed by the demo's stats, the status
// page's recorder and the metrics on promReg, and the workers' calls.
func (sc *scenario) build(rec *statuspage.Recorder, promReg *prometheus.Registry) error {
	mets := metrics.New(promReg)
	reg, err := registry.New(sc.loaded,
		registry.WithObserver(sc.stats), registry.WithObserver(rec), registry.WithObserver(mets))
	if err != nil {
		return err
	}
	sc.reg = reg
	if err := mets.Watch(reg); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	sc.calls = callsOf(reg)
	return nil
}

// close stops what startScenario started, the status server first.
func (sc *scenario) close() {
	if sc.status != nil {
		sc.status.Stop()
	}
	if sc.reg != nil {
		sc.reg.Close()
	}
	sc.fakes.Close()
}

// statusMux serves, on one server, the status page at /, the Prometheus
// metrics of the demo's registry at /metrics (package metrics, on its own
// prometheus registry) and the probes at /healthz and /readyz (package
// health), as a service would.
func statusMux(reg *registry.Registry, rec *statuspage.Recorder, promReg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", health.Liveness())
	mux.Handle("/readyz", health.Readiness(reg, nil))
	mux.Handle("/", statuspage.Handler(reg, rec))
	return mux
}

// header says what the demo runs: the fakes, each system's settings, the
// environment's notes, the status page.
func (sc *scenario) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "outbound demo: 4 fake upstreams on 127.0.0.1, %d workers, %s; Ctrl-C stops early.\n\n",
		sc.opts.workers, view.Dur(sc.opts.duration))
	for _, l := range sc.loaded {
		fmt.Fprintf(&b, "  %-9s %s\n", l.Name, sc.fakes.Role(l.Name))
		fmt.Fprintf(&b, "            %s\n", strings.TrimPrefix(l.Summary(), l.Name+" "))
	}
	for _, n := range sc.notes {
		fmt.Fprintln(&b, "  note: "+n)
	}
	fmt.Fprintln(&b, "\nTo point a service at these fakes (examples/bookstore/README.md):")
	fmt.Fprint(&b, "  export")
	for _, l := range sc.loaded {
		fmt.Fprintf(&b, " %s_BASE_URL=%s", l.Prefix, sc.fakes.URL(l.Name))
	}
	fmt.Fprintln(&b)
	if sc.status != nil {
		u := sc.status.URL
		fmt.Fprintf(&b, "\nstatus page (live, open it in a browser): %s\n", u)
		fmt.Fprintf(&b, "metrics (Prometheus):                     %smetrics\n", u)
		fmt.Fprintf(&b, "health (liveness, readiness):             %shealthz %sreadyz\n", u, u)
	}
	return b.String()
}

// snapshots returns what the demo saw of every system, in the order of
// fakes.Names; with resetRecent the recent latencies start again.
func (sc *scenario) snapshots(resetRecent bool) []stats.Snap {
	names := fakes.Names()
	out := make([]stats.Snap, 0, len(names))
	for _, name := range names {
		s := sc.stats.System(name).Snapshot(resetRecent)
		c := sc.reg.MustClient(name)
		s.Name, s.Role, s.Status = name, sc.fakes.Role(name), c.Status()
		s.ReadTimeout, s.RetriesAllowed = c.Config().ReadTimeout, c.Config().Retries
		out = append(out, s)
	}
	return out
}

// isTerminal reports whether w is a character device, where the live
// view redraws in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
