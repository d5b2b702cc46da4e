package main

import (
	"context"
	"io"

	"github.com/outbound-go/outbound/internal/checkcmd"
)

// codeDefaultsNote is what `outbound check` says of itself in its report
// and its help: it checks against the baseline, so a service's code
// defaults can make a value it passes fail the service.
const codeDefaultsNote = "defaults a service declares in code (config.System.Defaults) are unknown to outbound check, " +
	"which checks against the baseline; run the service's own check (config/configcheck, e.g. myservice check-config) to validate with them"

// runCheck is `outbound check`: the check of config/configcheck with no
// system declared in code, --system to declare some by name, and a note
// that code defaults are unknown to it.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return checkcmd.Run(ctx, checkcmd.Options{
		Name: "outbound check",
		About: "Loads every declared system from the environment and prints one line per\n" +
			"system (ok or FAIL, with its main settings, secrets redacted) and the\n" +
			"variables under its prefix that are not outbound's (names only), then\n" +
			"every problem, one per line. Exit 0 when valid, 1 when not, 2 when no system is\n" +
			"declared.\n\n" +
			"outbound check knows the baseline of every setting, not the defaults a\n" +
			"service declares in code (config.System.Defaults): a value it passes may\n" +
			"still stop the service. A service gets the same check with its own\n" +
			"systems from its own binary with config/configcheck:\n" +
			"  if len(os.Args) > 1 && os.Args[1] == \"check-config\" {\n" +
			"      os.Exit(configcheck.Main(os.Args[2:], systems...))\n" +
			"  }\n" +
			"then runs `myservice check-config [--json]` (same report, same exit codes).",
		SystemFlag: true,
		Note:       codeDefaultsNote,
		Stdout:     stdout,
		Stderr:     stderr,
	}, args)
}
