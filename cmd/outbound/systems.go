package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/outbound-go/outbound/config"
)

const systemsVar = config.SystemsVar

// noSystems is the message of exit code 2 when no system is declared.
const noSystems = "no system declared: set " + systemsVar + " (e.g. " + systemsVar +
	"=payments,inventory) or pass --system NAME"

// systemFlag collects the names given with --system, repeatable and comma
// separated, each name once.
type systemFlag []string

func (s *systemFlag) String() string { return strings.Join(*s, ",") }

func (s *systemFlag) Set(v string) error {
	for raw := range strings.SplitSeq(v, ",") {
		name := strings.TrimSpace(raw)
		if name == "" {
			return errors.New("empty system name")
		}
		if !slices.Contains(*s, name) {
			*s = append(*s, name)
		}
	}
	return nil
}

// declared reports whether any system is declared at all, by --system or
// by a non-blank entry of OUTBOUND_SYSTEMS. Whether the names are valid is
// for config.Load to say.
func declared(flagged systemFlag) bool {
	if len(flagged) > 0 {
		return true
	}
	for raw := range strings.SplitSeq(os.Getenv(systemsVar), ",") {
		if strings.TrimSpace(raw) != "" {
			return true
		}
	}
	return false
}

// codeSystems turns --system names into code-declared systems, which
// config.Load merges with OUTBOUND_SYSTEMS.
func codeSystems(names systemFlag) []config.System {
	out := make([]config.System, len(names))
	for i, n := range names {
		out[i] = config.System{Name: n}
	}
	return out
}

// load runs config.Load with the --system names and splits its error into
// problems. Problems config attributes to "code" came from --system here
// and are relabelled so. err is non-nil only for an error that is not a
// *config.Error, which config does not return today.
func load(names systemFlag) (loaded []config.Loaded, probs []config.Problem, err error) {
	loaded, err = config.Load(codeSystems(names)...)
	if err == nil {
		return loaded, nil, nil
	}
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		return loaded, nil, err
	}
	probs = slices.Clone(cerr.Problems)
	for i := range probs {
		if probs[i].System == "" && probs[i].Var == "code" {
			probs[i].Var = "--system"
			probs[i].Source = config.FromEnv // the value was given, not defaulted
		}
	}
	return loaded, probs, nil
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false // flag has printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}

// plural returns "1 system", "2 systems".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
