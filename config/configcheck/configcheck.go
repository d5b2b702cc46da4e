// Package configcheck runs the check of `outbound check` from a service's
// own binary, with the systems the service declares in code.
//
// `outbound check` knows the baseline of every setting, not the defaults
// a service declares in code ([config.System].Defaults): with a code
// default READ_TIMEOUT=20s, PAYMENTS_CALL_TIMEOUT=15s passes
// `outbound check` and then stops the service (CALL_TIMEOUT must be >=
// 23s). The service's own check loads exactly what the service will load,
// so an initContainer or a CI step that runs it passes exactly what the
// service accepts. One line in main gives a service the command:
//
//	func main() {
//		if len(os.Args) > 1 && os.Args[1] == "check-config" {
//			os.Exit(configcheck.Main(os.Args[2:], inventory.System, payments.System))
//		}
//		// ... start the service
//	}
//
// and `myservice check-config [--file F] [--json]` prints the report of
// `outbound check` (the same text and the same JSON, from the same code)
// for the systems declared in code plus those of OUTBOUND_SYSTEMS, with
// the exit codes of `outbound check`: [ExitValid] (0), [ExitInvalid] (1)
// and [ExitUsage] (2, a bad flag or no system declared). Like `outbound
// check`, it reads the TLS files and warns when nothing answers at the
// fleet's Redis (one TCP connection, no Redis command); it never starts
// the service.
//
// The package imports only config and the standard library.
package configcheck

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/checkcmd"
)

// Exit codes of [Main] and [Command.Run], those of `outbound check`.
const (
	ExitValid   = checkcmd.ExitValid   // 0: every system is valid
	ExitInvalid = checkcmd.ExitInvalid // 1: invalid; every problem is reported
	ExitUsage   = checkcmd.ExitUsage   // 2: a bad flag or argument, or no system declared
)

// Main checks the process environment against the given systems (those
// the service declares in code) plus those of OUTBOUND_SYSTEMS, prints
// the report to os.Stdout (usage errors to os.Stderr) and returns the
// exit code. args are the command's arguments, after its name: "--json"
// prints the report as JSON, "-h" the usage. The usage names the command
// after the words of os.Args before args ("bookstore check-config").
func Main(args []string, systems ...config.System) int {
	return Command{Systems: systems}.Run(context.Background(), args)
}

// Command is a service's check command, for a caller that picks its
// output or its environment (a test, a tool that checks an environment it
// did not start with). The zero Command checks the process environment,
// with no system declared in code, to os.Stdout and os.Stderr.
type Command struct {
	// Name is the command in the usage text ("bookstore check-config");
	// "" derives it from os.Args (see [Main]).
	Name string
	// Systems are the systems the service declares in code, with their
	// defaults.
	Systems []config.System
	// Env is the environment to check, KEY -> value; nil is the
	// process's.
	Env map[string]string
	// Stdout receives the report, Stderr the usage and its errors; nil is
	// os.Stdout, os.Stderr.
	Stdout, Stderr io.Writer
}

// Run parses args (--json, -h), checks the environment and writes the
// report. It returns [ExitValid], [ExitInvalid] or [ExitUsage]. ctx
// bounds the look at the fleet's Redis.
func (c Command) Run(ctx context.Context, args []string) int {
	name := c.Name
	if name == "" {
		name = commandName(os.Args, args)
	}
	return checkcmd.Run(ctx, checkcmd.Options{
		Name:    name,
		Systems: c.Systems,
		Env:     c.Env,
		Stdout:  c.Stdout,
		Stderr:  c.Stderr,
	}, args)
}

// commandName is the command that received args: the program's base name
// and the words of argv between it and args ("bookstore check-config"),
// or the base name alone when args are not the tail of argv.
func commandName(argv, args []string) string {
	if len(argv) == 0 {
		return "check-config"
	}
	words := []string{filepath.Base(argv[0])}
	if n := len(argv) - len(args); n >= 1 && slices.Equal(argv[n:], args) {
		words = append(words, argv[1:n]...)
	}
	return strings.Join(words, " ")
}
