// Package checkcmd is the configuration check that `outbound check` and a
// service's own check command (config/configcheck) both run: flags, the
// load, the report (text or --json), the warnings and the exit code. One
// implementation, so that both print the same report for the same
// environment; they differ only in the systems declared in code (the
// service's, with their defaults; none for the generic CLI), in the
// generic CLI's --system flag and in its note that code defaults are
// unknown to it.
package checkcmd

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/outbound-go/outbound/config"
)

// Exit codes of [Run], those of `outbound check`.
const (
	ExitValid   = 0 // every system is valid
	ExitInvalid = 1 // the configuration is invalid: every problem is reported
	ExitUsage   = 2 // a bad flag or argument, or no system declared
)

// Options is one check command. The zero value of every field but Name
// is usable.
type Options struct {
	// Name is the command as the usage text shows it: "outbound check",
	// "bookstore check-config".
	Name string
	// About is the usage text's paragraph about the command; "" gives
	// the default one.
	About string
	// Systems are the systems declared in code, with their defaults.
	Systems []config.System
	// SystemFlag accepts --system NAME (repeatable, comma separated):
	// more systems declared at the baseline, after Systems.
	SystemFlag bool
	// Note, when set, is printed before the summary line and given as
	// "note" in --json.
	Note string
	// Env is the environment to check; nil is the process's.
	Env map[string]string
	// Stdout and Stderr receive the report and the usage errors; nil is
	// os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
}

// defaultAbout describes the check in its usage text.
const defaultAbout = "Loads every declared system from the environment and prints one line per\n" +
	"system (ok or FAIL, with its main settings, secrets redacted) and the\n" +
	"variables under its prefix that are not outbound's (names only), then\n" +
	"every problem, one per line. Exit 0 when valid, 1 when not, 2 on a usage\n" +
	"error or when no system is declared."

// Run parses args, checks the configuration and writes the report. It
// returns [ExitValid], [ExitInvalid] or [ExitUsage].
func Run(ctx context.Context, o Options, args []string) int {
	o.fill()
	synopsis := "[--file F] [--json]"
	if o.SystemFlag {
		synopsis = "[--system NAME]... [--file F] [--json]"
	}
	fs := flag.NewFlagSet(o.Name, flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s %s\n\n%s\n\nFlags:\n", o.Name, synopsis, o.About)
		fs.PrintDefaults()
	}
	var flagged SystemFlag
	if o.SystemFlag {
		fs.Var(&flagged, "system", "declare system `NAME` in addition to "+config.SystemsVar+" (repeatable, or comma separated)")
	}
	asJSON := fs.Bool("json", false, "print one JSON object: {valid, systems: [{name, prefix, ok, vars}], problems, warnings}")
	file := fs.String("file", "", "check the settings file `F` laid over the environment, as the service reads it (default: "+config.FileVar+")")
	if code, ok := ParseFlags(fs, args); !ok {
		return code
	}
	// The service reads its settings file over the environment, at start
	// and on every change: the check reads it the same way.
	env := o.env()
	if path := cmp.Or(*file, env[config.FileVar]); path != "" {
		f, err := config.ReadFile(path)
		if err != nil {
			fmt.Fprintf(o.Stderr, "%s: settings file %s: %v\n", o.Name, path, err)
			return ExitInvalid
		}
		o.Env = f.Over(env)
	}
	if env := o.env(); len(o.Systems) == 0 && !Declared(flagged, env) {
		msg := noSystem(env)
		if o.SystemFlag {
			msg += " (or pass --system NAME)"
		}
		fmt.Fprintln(o.Stderr, o.Name+": "+msg)
		return ExitUsage
	}
	r := check(ctx, &o, flagged)
	if *asJSON {
		return r.writeJSON(&o)
	}
	return r.writeText(&o)
}

// noSystem says that env declares no system, in config's words, which
// name the <SYSTEM>_BASE_URL variables env holds.
func noSystem(env map[string]string) string {
	_, err := config.LoadEnv(env)
	var cerr *config.Error
	if errors.As(err, &cerr) {
		for _, p := range cerr.Problems {
			if p.Var == config.SystemsVar && strings.HasPrefix(p.Rule, "no system declared") {
				return p.Rule
			}
		}
	}
	return "no system declared: set " + config.SystemsVar + " (e.g. " + config.SystemsVar + "=payments,inventory)"
}

// fill gives the nil fields their defaults.
func (o *Options) fill() {
	if o.About == "" {
		o.About = defaultAbout
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
}

// env returns the environment the check reads.
func (o *Options) env() map[string]string {
	if o.Env != nil {
		return o.Env
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// Load runs config.LoadEnv over env with the systems declared in code,
// then those of flagged (--system, at the baseline), and splits its error
// into problems. A problem config reports on "code" for a name that came
// from --system is relabelled so. err is non-nil only for an error that
// is not a *config.Error, which config does not return today.
func Load(env map[string]string, code []config.System, flagged SystemFlag) (loaded []config.Loaded, probs []config.Problem, err error) {
	systems := slices.Clone(code)
	for _, n := range flagged {
		if !slices.ContainsFunc(code, func(s config.System) bool { return s.Name == n }) {
			systems = append(systems, config.System{Name: n})
		}
	}
	loaded, err = config.LoadEnv(env, systems...)
	if err == nil {
		return loaded, nil, nil
	}
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		return loaded, nil, err
	}
	probs = slices.Clone(cerr.Problems)
	for i, p := range probs {
		fromFlag := slices.Contains(flagged, p.Value) && !slices.ContainsFunc(code, func(s config.System) bool { return s.Name == p.Value })
		if p.System == "" && p.Var == "code" && fromFlag {
			probs[i].Var = "--system"
			probs[i].Source = config.FromEnv // the value was given, not defaulted
		}
	}
	return loaded, probs, nil
}

// SystemFlag collects the names given with --system, repeatable and
// comma separated, each name once.
type SystemFlag []string

// String lists the names, comma separated.
func (s *SystemFlag) String() string { return strings.Join(*s, ",") }

// Set adds the comma separated names of v; an empty name is an error.
func (s *SystemFlag) Set(v string) error {
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

// Declared reports whether any system is declared at all, by --system or
// by a non-blank entry of env's OUTBOUND_SYSTEMS. Whether the names are
// valid is for config to say.
func Declared(flagged SystemFlag, env map[string]string) bool {
	if len(flagged) > 0 {
		return true
	}
	for raw := range strings.SplitSeq(env[config.SystemsVar], ",") {
		if strings.TrimSpace(raw) != "" {
			return true
		}
	}
	return false
}

// ParseFlags parses args; when it returns false the command must return
// code: 0 after -h, 2 after a bad flag or a stray argument.
func ParseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitValid, false
		}
		return ExitUsage, false // flag has printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return ExitUsage, false
	}
	return ExitValid, true
}
