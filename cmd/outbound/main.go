// Command outbound validates and documents the configuration of outbound
// clients, and runs a demo.
//
// Usage:
//
//	outbound <command> [flags]
//
// The commands are:
//
//	check   load every declared system from the environment and report
//	        each one's effective settings and every problem at once
//	        (flags: --system NAME, repeatable; --json)
//	env     print the reference of every variable of the declared systems
//	        as a table, a commented .env template or a Kubernetes
//	        ConfigMap (flags: --system NAME; --format table|dotenv|configmap;
//	        --name CONFIGMAP_NAME)
//	demo    run a demo of the outbound clients
//	breaker force a system's breaker open or closed for a while, or
//	        release it, on a pod (--pod URL of its operator controls,
//	        statuspage.Controls) or on every pod through the fleet's
//	        Redis (OUTBOUND_FLEET_*) (flags: --pod URL; --token T; --for
//	        DURATION)
//	help    print this help
//
// Systems are declared in OUTBOUND_SYSTEMS (payments,inventory) and with
// --system; a name given both ways counts once. Each system reads its
// variables under its own prefix (PAYMENTS_BASE_URL, ...).
//
// Exit codes:
//
//	0  success; for check, every system is valid
//	1  the configuration is invalid (check reports every problem)
//	2  usage: unknown command, bad flag or argument, or no system declared
//
// `outbound check` can run in CI or as a Kubernetes initContainer: a bad
// environment stops the pod with one report naming every bad variable,
// secrets redacted. It knows the baseline of every setting, not the
// defaults a service declares in code (config.System.Defaults), so a value
// it passes may still stop the service. A service runs the same check
// with its own systems from its own binary through
// github.com/outbound-go/outbound/config/configcheck (`myservice
// check-config`, same report and exit codes): that is the check for an
// initContainer.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/outbound-go/outbound/cmd/outbound/internal/demo"
)

// Exit codes of run.
const (
	exitOK      = 0
	exitInvalid = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand: its name, a one-line summary for the usage
// text, and the function that runs it with the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands is the subcommand table, in the order the usage lists them.
func commands() []command {
	return []command{
		{"check", "validate the configuration of the declared systems", runCheck},
		{"env", "print every variable of the declared systems (table, dotenv or ConfigMap)", runEnv},
		{"demo", "run a demo of the outbound clients", demo.Run},
		{"breaker", "force a system's breaker open or closed, or release it (operators)", runBreaker},
	}
}

// run runs the command line args (without the program name) and returns
// the exit code. All output goes to stdout and stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "outbound: no command given")
		usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if name == "help" && len(rest) > 0 {
			// outbound help check == outbound check -h, on stdout.
			if c, ok := lookup(rest[0]); ok {
				return c.run(ctx, []string{"-h"}, stdout, stdout)
			}
			fmt.Fprintf(stderr, "outbound help: unknown command %q\n", rest[0])
			usage(stderr)
			return exitUsage
		}
		usage(stdout)
		return exitOK
	}
	c, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "outbound: unknown command %q\n", name)
		usage(stderr)
		return exitUsage
	}
	return c.run(ctx, rest, stdout, stderr)
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usage prints the top-level help.
func usage(w io.Writer) {
	fmt.Fprint(w, `outbound validates and documents the configuration of outbound clients,
and runs a demo.

Usage:
  outbound <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-7s %s\n", "help", "print this help; 'outbound help <command>' for its flags")
	fmt.Fprint(w, `
Systems are declared in `+systemsVar+` (e.g. payments,inventory) and with
--system NAME (repeatable); a name given both ways counts once. Each system
reads its variables under its own prefix: PAYMENTS_BASE_URL, ...

Examples:
  `+systemsVar+`=payments PAYMENTS_BASE_URL=https://pay.internal outbound check
  outbound check --system payments --json
  outbound env --system payments --system inventory --format configmap

outbound check knows the baseline, not the defaults a service declares in
code: a service runs the same check with its own systems from its own
binary (config/configcheck: myservice check-config).

Exit codes:
  0  success (check: every system is valid)
  1  invalid configuration (check reports every problem)
  2  usage: unknown command, bad flag, or no system declared
`)
}
