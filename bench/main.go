// Command bench compares outbound's registry with raw net/http and with
// other resilience libraries on one loopback workload, in one run:
//
//	cd bench && go run .
//
// (go run . -hedge runs the hedging comparison of hedge.go instead.)
//
// Every client sends GET requests to the same loopback server (a 64-byte
// body), reads the whole body and closes it, from exactly N worker
// goroutines (N = 1, 16, 64 calls in flight). Rounds are interleaved
// (raw, hand-rolled, outbound, outbound-omit, retryablehttp, failsafe-go,
// hystrix-go, raw, ...), each with fresh clients, and the table gives the
// median of the rounds: requests per second, the ratios to raw and to the
// hand-rolled reference (medians of the per-round ratios, so that drift of
// the machine cancels out, with their range over the rounds), latency p50
// and p99, the CPU time of the process per call (getrusage; other load
// on the machine moves it far less than req/s), heap allocations and
// bytes per call (runtime.MemStats deltas over the round divided by
// calls) and the connections the server accepted in the round.
//
// By default the server runs in the same process, so that client and
// server share the CPUs and the CPU time and allocations counted are
// theirs together.
// To measure the client alone, run the server in a process of its own and
// point the client at it:
//
//	go run . -serve 127.0.0.1:0          # prints its URL, serves until killed
//	go run . -target http://127.0.0.1:PORT
//
// pinned.sh does this with each process pinned to a CPU of its own
// (taskset, GOMAXPROCS=1), so that the client's CPU per call decides its
// throughput; docs/performance.md says how to read the figures.
// -benchfmt FILE also writes every round in Go's benchmark format, for
// benchstat. -cpuprofile FILE profiles the client's whole run: run one
// client at one level (bench/pinned.sh -clients outbound -inflight 16
// -cpuprofile /tmp/ob.prof), then the reference, and compare them with
// go tool pprof.
//
// Every client is configured alike: the same tuned transport as the
// registry gives a system (pool sized to 64, connect, TLS and
// response-header timeouts), a 15s bound on the whole call, 2 retries with
// backoff for idempotent requests, and a breaker where the library has
// one. This module is separate from outbound's (see go.mod), so that none
// of the peers ever enters outbound's dependencies.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings every client shares: the registry's baseline.
const (
	poolSize       = 64
	callTimeout    = 15 * time.Second
	connectTimeout = 2 * time.Second
	tlsTimeout     = 3 * time.Second
	readTimeout    = 10 * time.Second
	idleTimeout    = 90 * time.Second
	retries        = 2
	backoffBase    = 100 * time.Millisecond
	backoffMax     = 2 * time.Second
)

var body = []byte(strings.Repeat("x", 64))

// options are the command's flags.
type options struct {
	rounds   int
	duration time.Duration
	levels   []int
	clients  []client
	hedge    bool
	serve    string // -serve: run the server alone at this address
	target   string // -target: the URL of a -serve process
	benchfmt string // -benchfmt: also write the rounds to this file
	cpuprof  string // -cpuprofile: write a CPU profile of the whole run to this file
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	switch {
	case o.serve != "":
		err = serve(o.serve)
	case o.hedge:
		err = runHedge(2000, 20)
	default:
		err = runPeers(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 7, "rounds per client and in-flight level (the table shows the median)")
	fs.DurationVar(&o.duration, "duration", 500*time.Millisecond, "measured duration of one round")
	inflight := fs.String("inflight", "1,16,64", "comma-separated numbers of calls in flight")
	only := fs.String("clients", "", "comma-separated subset of clients to run (default: all)")
	fs.BoolVar(&o.hedge, "hedge", false, "run the hedging comparison on a slow tail instead (hedge.go)")
	fs.StringVar(&o.serve, "serve", "", "run only the bench server at this address (host:port), print its URL, serve until SIGINT/SIGTERM")
	fs.StringVar(&o.target, "target", "", "call the bench server at this URL (printed by -serve) instead of starting one")
	fs.StringVar(&o.benchfmt, "benchfmt", "", "also write each round to this file in Go benchmark format (for benchstat)")
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the whole run to this file (run one client: -clients outbound)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.rounds < 1 || o.duration <= 0 {
		return o, errors.New("-rounds and -duration must be positive")
	}
	if o.serve != "" && (o.target != "" || o.hedge) || o.hedge && o.target != "" {
		return o, errors.New("-serve, -target and -hedge exclude each other")
	}
	var err error
	if o.levels, err = parseLevels(*inflight); err != nil {
		return o, err
	}
	o.clients, err = pickClients(*only)
	return o, err
}

func parseLevels(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("in-flight level %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// pickClients is the clients named in the comma-separated list, in the
// list's order, or all of them for "".
func pickClients(list string) ([]client, error) {
	if list == "" {
		return allClients, nil
	}
	var out []client
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(allClients, func(c client) bool { return c.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("unknown client %q", name)
		}
		out = append(out, allClients[i])
	}
	return out, nil
}

// cellKey names one cell of the table: a client at a number in flight.
type cellKey struct {
	client   string
	inflight int
}

// runPeers runs the interleaved rounds and prints the table.
func runPeers(o options) (err error) {
	up, err := openUpstream(o.target)
	if err != nil {
		return err
	}
	defer up.close()
	var bf io.Writer = io.Discard
	if o.benchfmt != "" {
		f, err := os.Create(o.benchfmt)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		bf = f
	}
	if o.cpuprof != "" {
		stop, err := startCPUProfile(o.cpuprof)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	printHeader(os.Stdout, o, up)
	writeBenchHeader(bf, up)

	start := time.Now()
	cells := make(map[cellKey][]result)
	for _, n := range o.levels {
		for r := 0; r < o.rounds; r++ {
			for _, c := range o.clients {
				res, err := runRound(c, n, o.duration, up)
				if err != nil {
					return fmt.Errorf("%s at %d in flight: %w", c.name, n, err)
				}
				k := cellKey{c.name, n}
				cells[k] = append(cells[k], res)
				fmt.Fprintf(os.Stderr, "  %-14s inflight=%-3d round %d: %8.0f req/s\n", c.name, n, r+1, res.rps)
				writeBenchLine(bf, k, res)
			}
		}
	}
	printTable(os.Stdout, o, cells)
	end := fmt.Sprintf("total run time %v; load average at the end: %s", time.Since(start).Round(100*time.Millisecond), loadAvg())
	fmt.Printf("\n%s\n", end)
	fmt.Fprintln(bf, end)
	return nil
}

// startCPUProfile starts a CPU profile into file; stop ends it and
// closes the file.
func startCPUProfile(file string) (stop func() error, _ error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

func openUpstream(target string) (*upstream, error) {
	if target == "" {
		return localUpstream()
	}
	return remoteUpstream(target)
}
