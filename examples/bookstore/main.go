package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/config/configcheck"
	"github.com/outbound-go/outbound/examples/bookstore/domain"
	"github.com/outbound-go/outbound/examples/bookstore/httpapi"
	"github.com/outbound-go/outbound/examples/bookstore/outbound"
	"github.com/outbound-go/outbound/health"
	"github.com/outbound-go/outbound/registry"
)

// priceCents is the price of every book in this example.
const priceCents = 1999

func main() {
	// The service's own configuration check, for an initContainer or CI:
	// the report and exit codes of `outbound check`, with the code
	// defaults of the systems below, which `outbound check` cannot know.
	if len(os.Args) > 1 && os.Args[1] == "check-config" {
		os.Exit(configcheck.Main(os.Args[2:], inventory.System, payments.System))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], config.Load, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// loadFunc loads and validates the systems' settings: config.Load reads
// the process environment; tests pass config.LoadEnv over a map of their
// own, so that they can run in parallel.
type loadFunc func(systems ...config.System) ([]config.Loaded, error)

// run starts the service and serves until ctx ends, then shuts down
// gracefully. It returns the exit status: 0 after a clean shutdown, 1 for
// a bad environment or a server failure, 2 for bad flags. listening, if
// not nil, is called with the bound address and the registry once the
// service accepts requests (a test checks the registry after shutdown).
func run(ctx context.Context, args []string, load loadFunc, stderr io.Writer, listening func(addr string, reg *registry.Registry)) int {
	fs := flag.NewFlagSet("bookstore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", ":8080", "`address` to listen on")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "how long requests in flight may take to finish at shutdown")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	// One registry for the process, built and validated before anything
	// listens: a bad environment stops here with every problem listed.
	var reg *registry.Registry
	loaded, err := load(inventory.System, payments.System)
	if err == nil {
		reg, err = registry.New(loaded, registry.WithLogger(log))
	}
	if err != nil {
		fmt.Fprintf(stderr, "bookstore: cannot start: %v\n", err)
		return 1
	}
	defer reg.Close()

	svc := domain.NewService(
		outbound.NewStock(inventory.New(reg.MustClient(inventory.Name))),
		outbound.NewPayments(payments.New(reg.MustClient(payments.Name))),
		priceCents)

	mux := http.NewServeMux()
	mux.Handle("/orders", httpapi.Handler(svc, log))
	mux.Handle("GET /healthz", health.Liveness())
	// Always ready: the service degrades (503 with Retry-After) rather
	// than stops when a dependency is down, and every pod shares the same
	// upstreams, so taking them all out of the Service would turn a clear
	// 503 into refused connections. The report still shows every breaker.
	mux.Handle("GET /readyz", health.Readiness(reg, health.AlwaysReady))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "bookstore: %v\n", err)
		return 1
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      40 * time.Second, // > the 35s an order may take
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("bookstore listening", "addr", ln.Addr().String(), "systems", reg.Names())
	if listening != nil {
		listening(ln.Addr().String(), reg)
	}

	select {
	case err := <-served:
		fmt.Fprintf(stderr, "bookstore: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	log.Info("bookstore shutting down", "grace", *grace)
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	code := 0
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown: requests still in flight were cut", "error", err)
		_ = srv.Close()
		code = 1
	}
	<-served // http.ErrServerClosed
	return code
}
