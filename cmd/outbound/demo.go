package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/health"
	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	defaultStatusAddr = "127.0.0.1:8089"
	// demoCallBound bounds every call of a worker, as a request
	// handler's deadline would; the registry caps each call by it.
	demoCallBound = 3 * time.Second
	// demoThinkMin and demoThinkMax bound the pause between a worker's
	// calls, so the load stays modest on a laptop.
	demoThinkMin = 10 * time.Millisecond
	demoThinkMax = 40 * time.Millisecond
)

// demoOrder is the order of the systems in the table; worker i loads
// demoOrder[i%4].
var demoOrder = []string{"inventory", "catalog", "payments", "shipping"}

// demoSystems declares the demo's systems, pointed at the fakes.
// inventory and payments keep their adapters' code defaults; timings that
// would take minutes to show anything are shortened, with the reason.
func demoSystems(f *fakes) []config.System {
	inv := inventory.System
	inv.Defaults.BaseURL = f.url("inventory")

	catalog := config.System{Name: "catalog", Defaults: config.Client{
		BaseURL: f.url("catalog"),
		// The fake answers in 200-800ms: a 700ms read timeout cuts the
		// slowest sixth, and one retry usually lands a faster answer.
		ConnectTimeout:      200 * time.Millisecond,
		TLSHandshakeTimeout: 500 * time.Millisecond,
		ReadTimeout:         700 * time.Millisecond,
		CallTimeout:         2 * time.Second,
		Retries:             1,
	}}

	pay := payments.System
	pay.Defaults.BaseURL = f.url("payments")
	// The fake's 503 storms last 3s: a 5s window and a 2s open time let
	// the breaker open during a storm and close after it, within the
	// demo. Production keeps the baseline (30s window, 15s open).
	pay.Defaults.BreakerMinRequests = 10
	pay.Defaults.BreakerWindow = 5 * time.Second
	pay.Defaults.BreakerOpenTimeout = 2 * time.Second

	shipping := config.System{Name: "shipping", Defaults: config.Client{
		BaseURL: f.url("shipping"),
		// The fake never answers: a 300ms read timeout ends each wait,
		// four failed attempts open the breaker, and every 3s one probe
		// checks whether it came back. Two slots in flight show the
		// bulkhead shedding while they hang.
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
	return []config.System{inv, catalog, pay, shipping}
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "[--duration D] [--workers N] [--plain] [--status-addr ADDR] [--fleet]",
		"Starts four fake upstreams on 127.0.0.1 (inventory: healthy; catalog: slow;\n"+
			"payments: 503 storms and 429s; shipping: never answers), builds a registry\n"+
			"for them in code, drives a bounded load through it and shows, every second,\n"+
			"each system's calls, retries, breaker, bulkhead and latency; then explains\n"+
			"what tripped, what was shed and what stayed fast. The live status page of\n"+
			"the registry (package statuspage), its Prometheus /metrics and the /healthz\n"+
			"and /readyz probes are served on --status-addr, loopback only.\n"+
			"No environment is needed: INVENTORY_*, CATALOG_*, PAYMENTS_* and SHIPPING_*\n"+
			"variables, if set, tune the systems (BASE_URL excepted: the demo only talks\n"+
			"to its own fakes).\n"+
			"It stops by itself after --duration, or at Ctrl-C.", stderr)
	duration := fs.Duration("duration", 20*time.Second, "how long to drive the load")
	workers := fs.Int("workers", 16, "concurrent workers, spread over the four systems (0: serve the fakes only)")
	plain := fs.Bool("plain", false, "append plain lines instead of redrawing the screen")
	statusAddr := fs.String("status-addr", defaultStatusAddr, "loopback `ADDR` of the live status page (a busy port falls back to a free one); empty: none")
	fleetMode := fs.Bool("fleet", false, "three pods share the payments breaker over a redis-server the demo starts (needs redis-server on the PATH)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case *duration <= 0:
		fmt.Fprintln(stderr, "outbound demo: --duration must be > 0")
		return exitUsage
	case *workers < 0 || *workers > 1024:
		fmt.Fprintln(stderr, "outbound demo: --workers must be 0..1024")
		return exitUsage
	}
	if *statusAddr != "" {
		if err := checkLoopback(*statusAddr); err != nil {
			fmt.Fprintf(stderr, "outbound demo: --status-addr %q: %v\n", *statusAddr, err)
			return exitUsage
		}
	}

	if *fleetMode {
		return runDemoFleet(ctx, *duration, *statusAddr, stdout, stderr)
	}

	f, err := startFakes()
	if err != nil {
		fmt.Fprintf(stderr, "outbound demo: %v\n", err)
		return exitInvalid
	}
	defer f.Close()

	loaded, notes, err := loadDemo(demoSystems(f), f)
	if err != nil {
		fmt.Fprintf(stderr, "outbound demo: %v\n", err)
		return exitInvalid
	}
	d := &demo{start: time.Now(), fakes: f, stats: map[string]*sysStats{}, events: &eventLog{}}
	for _, name := range demoOrder {
		d.stats[name] = &sysStats{reasons: map[string]uint64{}}
	}
	rec := statuspage.NewRecorder()     // the status page's latencies, last errors, breaker changes
	promReg := prometheus.NewRegistry() // the demo's own: /metrics shows outbound's series only
	mets := metrics.New(promReg)
	reg, err := registry.New(loaded,
		registry.WithObserver(&demoObserver{start: d.start, stats: d.stats, events: d.events}),
		registry.WithObserver(rec), registry.WithObserver(mets))
	if err != nil {
		fmt.Fprintf(stderr, "outbound demo: %v\n", err)
		return exitInvalid
	}
	defer reg.Close()
	if err := mets.Watch(reg); err != nil {
		fmt.Fprintf(stderr, "outbound demo: metrics: %v\n", err)
		return exitInvalid
	}
	d.reg, d.loaded = reg, loaded
	d.calls = demoCalls(reg)

	statusURL := ""
	if *statusAddr != "" {
		url, stop, note, err := startStatus(*statusAddr, demoMux(reg, rec, promReg))
		if err != nil {
			fmt.Fprintf(stderr, "outbound demo: status page: %v\n", err)
			return exitInvalid
		}
		defer stop()
		statusURL = url
		if note != "" {
			notes = append(notes, note)
		}
	}

	var head strings.Builder
	d.header(&head, *workers, *duration, statusURL, notes)
	ansi := !*plain && isTerminal(stdout)
	if !ansi {
		_, _ = io.WriteString(stdout, head.String())
	}
	stopped := d.run(ctx, stdout, head.String(), *workers, *duration, ansi)
	elapsed := time.Since(d.start)
	writeSummary(stdout, d.snapshots(false), elapsed, *workers, stopped)
	return exitOK
}

// demo is one run: the fakes, the registry, the stats.
type demo struct {
	start  time.Time
	fakes  *fakes
	reg    *registry.Registry
	loaded []config.Loaded
	stats  map[string]*sysStats
	events *eventLog
	calls  map[string]func(ctx context.Context, worker int, n uint64) error
}

// loadDemo validates the demo's systems with config.Load, which also
// applies the INVENTORY_*, CATALOG_*, PAYMENTS_* and SHIPPING_* variables
// of the environment, if any, so the demo can be tuned. A BASE_URL from
// the environment is ignored: the demo talks to its own fakes only.
// Systems declared in OUTBOUND_SYSTEMS are not the demo's and are left
// out, with their problems.
func loadDemo(systems []config.System, f *fakes) ([]config.Loaded, []string, error) {
	all, err := config.Load(systems...)
	names := make([]string, len(systems))
	for i, s := range systems {
		names[i] = s.Name
	}
	if err != nil {
		var cerr *config.Error
		if !errors.As(err, &cerr) {
			return nil, nil, err
		}
		var mine []string
		for _, p := range cerr.Problems {
			if slices.Contains(names, p.System) {
				mine = append(mine, "  "+p.Error())
			}
		}
		if len(mine) > 0 {
			return nil, nil, fmt.Errorf("the environment tunes the demo's systems with %s:\n%s\n"+
				"fix or unset them (the demo reads %s_* to let you tune it)",
				plural(len(mine), "problem"), strings.Join(mine, "\n"), strings.Join(prefixes(names), "_*, "))
		}
	}
	var out []config.Loaded
	var notes []string
	for _, l := range all {
		if !slices.Contains(names, l.Name) {
			continue
		}
		for _, v := range l.Vars() {
			switch {
			case v.Source != config.FromEnv.String():
			case v.Setting == "BaseURL":
				notes = append(notes, fmt.Sprintf("ignoring %s from the environment: the demo talks to its own fakes only", v.Name))
			default:
				notes = append(notes, fmt.Sprintf("using %s=%s from the environment", v.Name, v.Value))
			}
		}
		l.Client.BaseURL = f.url(l.Name)
		l, err := config.Revalidate(l)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, l)
	}
	return out, notes, nil
}

func prefixes(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = config.Prefix(n)
	}
	return out
}

// demoCalls returns the call each worker makes, by system, through the
// sample adapters and adapters.GetJSON.
func demoCalls(reg *registry.Registry) map[string]func(ctx context.Context, worker int, n uint64) error {
	inv := inventory.New(reg.MustClient("inventory"))
	pay := payments.New(reg.MustClient("payments"))
	catalog, shipping := reg.MustClient("catalog"), reg.MustClient("shipping")
	return map[string]func(context.Context, int, uint64) error{
		"inventory": func(ctx context.Context, _ int, _ uint64) error {
			_, err := inv.Stock(ctx, randomISBN())
			return err
		},
		"catalog": func(ctx context.Context, _ int, _ uint64) error {
			var book struct{ Title string }
			return adapters.GetJSON(ctx, catalog, []string{"books", randomISBN()}, &book)
		},
		"payments": func(ctx context.Context, worker int, n uint64) error {
			_, err := pay.Register(ctx, fmt.Sprintf("w%d-%d", worker, n), 500+rand.Int64N(9500))
			return err
		},
		"shipping": func(ctx context.Context, _ int, _ uint64) error {
			var quote struct{ Cents int64 }
			return adapters.GetJSON(ctx, shipping, []string{"quotes", randomISBN()}, &quote)
		},
	}
}

func randomISBN() string { return fmt.Sprintf("978%010d", rand.N(10_000_000_000)) }

// run drives the load until duration passes or ctx ends, redrawing every
// second, and reports whether ctx ended it early. Every worker has
// returned when it returns. With ansi, each frame clears the screen and
// repeats head; otherwise frames are appended.
func (d *demo) run(ctx context.Context, w io.Writer, head string, workers int, duration time.Duration, ansi bool) (stopped bool) {
	// The workers' context has no deadline of its own: a deadline would
	// shrink the budget of the last calls and make them fail with a
	// spent budget that has nothing to do with the upstreams.
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	timer := time.NewTimer(duration)
	defer timer.Stop()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { d.worker(workCtx, i) })
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	shown := 0
	var drawn time.Time
	draw := func(final bool) {
		drawn = time.Now()
		var b strings.Builder
		if ansi {
			b.WriteString(ansiHome + ansiClear + head + "\n")
		} else {
			b.WriteString("\n")
		}
		writeLiveTable(&b, d.snapshots(!final), time.Since(d.start), duration)
		if ansi {
			ev := d.events.since(0)
			if len(ev) > 0 {
				b.WriteString("\nbreaker transitions (latest last):\n")
				writeEvents(&b, ev[max(0, len(ev)-8):])
			}
		} else {
			ev := d.events.since(shown)
			shown += len(ev)
			writeEvents(&b, ev)
		}
		_, _ = io.WriteString(w, b.String())
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-timer.C:
			break loop
		case <-tick.C:
			draw(false)
		}
	}
	stopWork()
	wg.Wait()
	if time.Since(drawn) > 250*time.Millisecond {
		draw(true)
	}
	return ctx.Err() != nil
}

// worker calls its system in a loop, each call bounded by demoCallBound,
// with a short pause between calls, until ctx ends.
func (d *demo) worker(ctx context.Context, i int) {
	name := demoOrder[i%len(demoOrder)]
	call, st := d.calls[name], d.stats[name]
	for n := uint64(1); ; n++ {
		cctx, cancel := context.WithTimeout(ctx, demoCallBound)
		t0 := time.Now()
		err := call(cctx, i, n)
		el := time.Since(t0)
		cancel()
		if ctx.Err() != nil {
			return // cut short by the end of the demo: not counted
		}
		st.record(el, err)
		t := time.NewTimer(demoThinkMin + rand.N(demoThinkMax-demoThinkMin))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// snapshots returns every system's stats and status, in demoOrder.
func (d *demo) snapshots(resetRecent bool) []snap {
	out := make([]snap, 0, len(demoOrder))
	for _, name := range demoOrder {
		s := d.stats[name].snapshot(resetRecent)
		s.name, s.role = name, d.fakes.role(name)
		c := d.reg.MustClient(name)
		s.status = c.Status()
		s.readTimeout, s.retriesAllowed = c.Config().ReadTimeout, c.Config().Retries
		out = append(out, s)
	}
	return out
}

// header prints what the demo runs: the fakes, each system's settings,
// the status page.
func (d *demo) header(w io.Writer, workers int, duration time.Duration, statusURL string, notes []string) {
	fmt.Fprintf(w, "outbound demo: 4 fake upstreams on 127.0.0.1, %d workers, %s; Ctrl-C stops early.\n\n",
		workers, fmtDur(duration))
	for _, l := range d.loaded {
		fmt.Fprintf(w, "  %-9s %s\n", l.Name, d.fakes.role(l.Name))
		fmt.Fprintf(w, "            %s\n", strings.TrimPrefix(l.Summary(), l.Name+" "))
	}
	for _, n := range notes {
		fmt.Fprintln(w, "  note: "+n)
	}
	fmt.Fprintln(w, "\nTo point a service at these fakes (examples/bookstore/README.md):")
	fmt.Fprint(w, "  export")
	for _, l := range d.loaded {
		fmt.Fprintf(w, " %s_BASE_URL=%s", l.Prefix, d.fakes.url(l.Name))
	}
	fmt.Fprintln(w)
	if statusURL != "" {
		fmt.Fprintf(w, "\nstatus page (live, open it in a browser): %s\n", statusURL)
		fmt.Fprintf(w, "metrics (Prometheus):                     %smetrics\n", statusURL)
		fmt.Fprintf(w, "health (liveness, readiness):             %shealthz %sreadyz\n", statusURL, statusURL)
	}
}

// demoMux serves, on one server, the status page at /, the Prometheus
// metrics of the demo's registry at /metrics (package metrics, on its own
// prometheus registry) and the probes at /healthz and /readyz (package
// health), as a service would.
func demoMux(reg *registry.Registry, rec *statuspage.Recorder, promReg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", health.Liveness())
	mux.Handle("/readyz", health.Readiness(reg, nil))
	mux.Handle("/", statuspage.Handler(reg, rec))
	return mux
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

// checkLoopback refuses an address that is not on the loopback
// interface: the demo never listens anywhere else.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("not a loopback address: use 127.0.0.1:PORT, [::1]:PORT or localhost:PORT")
}

// startStatus serves h on addr, or on a free port of the same host when
// addr is busy. stop shuts the server down and waits for it.
func startStatus(addr string, h http.Handler) (url string, stop func(), note string, err error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(addr)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		note = addr + " is busy: the status page took a free port"
	}
	if err != nil {
		return "", nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}
	return "http://" + ln.Addr().String() + "/", stop, note, nil
}
