package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/checkcmd"
)

const systemsVar = config.SystemsVar

// noSystems is the message of exit code 2 when no system is declared.
const noSystems = "no system declared: set " + systemsVar + " (e.g. " + systemsVar +
	"=payments,inventory) or pass --system NAME"

// systemFlag collects the names given with --system, repeatable and comma
// separated, each name once.
type systemFlag = checkcmd.SystemFlag

// processEnv returns the process environment as a map.
func processEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// declared reports whether any system is declared at all, by --system or
// by a non-blank entry of OUTBOUND_SYSTEMS.
func declared(flagged systemFlag) bool { return checkcmd.Declared(flagged, processEnv()) }

// load loads the process environment with the --system names (declared
// at the baseline) and splits its error into problems, as check does.
func load(names systemFlag) ([]config.Loaded, []config.Problem, error) {
	return checkcmd.Load(processEnv(), nil, names)
}

// newFlagSet returns a FlagSet for subcommand name that reports to stderr,
// with a usage text made of synopsis, about and the flags.
func newFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("outbound "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: outbound %s %s\n\n%s\n\nFlags:\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; when it returns false the command must return
// code: 0 after -h, 2 after a bad flag or a stray argument.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	return checkcmd.ParseFlags(fs, args)
}

// plural returns "1 system", "2 systems".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
