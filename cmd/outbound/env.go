package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/redact"
)

const defaultConfigMapName = "outbound-config"

// dnsSubdomainRE is the shape Kubernetes requires of a ConfigMap name.
var dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func runEnv(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("env", "[--system NAME]... [--format table|dotenv|configmap] [--name CONFIGMAP_NAME]",
		"Prints the registry's variables (OUTBOUND_*) and every variable of the\n"+
			"declared systems, with its default and rule:\n"+
			"  table      aligned columns NAME TYPE DEFAULT RULE DESCRIPTION\n"+
			"  dotenv     a commented .env template, every variable at its default\n"+
			"  configmap  a Kubernetes ConfigMap of "+systemsVar+" and every non-secret\n"+
			"             variable at its default (secret ones belong in a Secret)\n"+
			"The output depends only on the declared systems, in declaration order\n"+
			"(--system first, then "+systemsVar+"), not on the values in the environment.", stderr)
	var systems systemFlag
	fs.Var(&systems, "system", "declare system `NAME` in addition to "+systemsVar+" (repeatable, or comma separated)")
	format := fs.String("format", "table", "output `format`: table, dotenv or configmap")
	cmName := fs.String("name", defaultConfigMapName, "metadata.name `CONFIGMAP_NAME` of the ConfigMap (--format configmap)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	nameSet := false
	fs.Visit(func(f *flag.Flag) { nameSet = nameSet || f.Name == "name" })
	switch *format {
	case "table", "dotenv", "configmap":
	default:
		fmt.Fprintf(stderr, "outbound env: unknown --format %q: use table, dotenv or configmap\n", *format)
		return exitUsage
	}
	if nameSet && *format != "configmap" {
		fmt.Fprintln(stderr, "outbound env: --name applies only to --format configmap")
		return exitUsage
	}
	if len(*cmName) > 253 || !dnsSubdomainRE.MatchString(*cmName) {
		fmt.Fprintf(stderr, "outbound env: --name %q is not a valid ConfigMap name (lower case letters, digits, '-' and '.', at most 253)\n", *cmName)
		return exitUsage
	}
	if !declared(systems) {
		fmt.Fprintln(stderr, "outbound env: "+noSystems)
		return exitUsage
	}

	// config.Load says which systems are declared, in which order, and
	// what is wrong with the list itself. Problems with the values of a
	// system do not matter here: env documents defaults.
	loaded, probs, err := load(systems)
	if err != nil {
		fmt.Fprintf(stderr, "outbound env: %v\n", err)
		return exitInvalid
	}
	var global []config.Problem
	for _, p := range probs {
		if p.System == "" {
			global = append(global, p)
		}
	}
	if len(global) > 0 {
		fmt.Fprintf(stderr, "outbound env: the list of systems is invalid (%s):\n", plural(len(global), "problem"))
		for _, p := range global {
			fmt.Fprintln(stderr, "  "+p.Error())
		}
		return exitInvalid
	}
	decl := make([]config.System, len(loaded))
	names := make([]string, len(loaded))
	for i, l := range loaded {
		decl[i] = config.System{Name: l.Name}
		names[i] = l.Name
	}
	// The registry's variables first, then the systems'; all from config.
	vars := append(config.GlobalReference(), config.Reference(decl...)...)

	w := bufio.NewWriter(stdout)
	switch *format {
	case "table":
		writeTable(w, vars)
	case "dotenv":
		writeDotenv(w, names, vars)
	case "configmap":
		writeConfigMap(w, *cmName, names, vars)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "outbound env: %v\n", err)
		return exitInvalid
	}
	return exitOK
}

// writeTable writes vars as aligned columns.
func writeTable(w io.Writer, vars []config.Var) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tDEFAULT\tRULE\tDESCRIPTION")
	for _, v := range vars {
		def := redact.Printable(v.Default) // a default from code may hold anything
		if def == "" {
			def = "-"
		}
		desc := v.Description
		if v.Secret {
			desc += " [secret]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, v.Type, def, v.Rule, desc)
	}
	tw.Flush()
}

// required reports whether v has no default and must be set.
func required(v config.Var) bool {
	return v.Default == "" && (v.Setting == "BaseURL" || strings.HasPrefix(v.Rule, "required"))
}

// setTo is the value a template gives v: the declared systems for
// OUTBOUND_SYSTEMS, else v's default.
func setTo(v config.Var, names []string) string {
	if v.System == "" && v.Name == systemsVar {
		return strings.Join(names, ",")
	}
	return v.Default
}

// writeDotenv writes a commented .env template: the registry's variables
// (OUTBOUND_SYSTEMS set to the declared systems), then every variable of
// every system, each at its default (the fault variables of drills
// commented out).
func writeDotenv(w io.Writer, names []string, vars []config.Var) {
	fmt.Fprint(w, `# Environment of the outbound clients; generated by: outbound env --format dotenv
# Every variable is set to its default: change what you need and delete the
# rest, or keep them to pin the defaults. Variables marked required have no
# default and must be set. Secret variables may carry credentials: keep them
# in a Secret (or a secret store), never in a ConfigMap or in git.

# ---- the registry (OUTBOUND_*) ----
`)
	system := ""
	for _, v := range vars {
		if v.System != system {
			system = v.System
			fmt.Fprintf(w, "\n# ---- %s (%s_*) ----\n", system, config.Prefix(system))
		}
		fmt.Fprintf(w, "\n# %s (%s; %s)\n", v.Description, v.Type, v.Rule)
		switch {
		case required(v) && v.Secret:
			fmt.Fprintln(w, "# Required. Secret: it may carry credentials, so it belongs in a Secret.")
		case required(v):
			fmt.Fprintln(w, "# Required.")
		case v.Secret:
			fmt.Fprintln(w, "# Secret: it may carry credentials, so it belongs in a Secret.")
		case strings.HasPrefix(v.Setting, "Fault"):
			// Set, even to its default, a fault variable fails the
			// load unless OUTBOUND_FAULTS=on: drills are opt-in.
			fmt.Fprintf(w, "# Drills only: needs %s=on (see docs/fault-drills.md).\n# %s=%s\n", config.FaultsVar, v.Name, redact.Printable(v.Default))
			continue
		}
		fmt.Fprintf(w, "%s=%s\n", v.Name, redact.Printable(setTo(v, names)))
	}
}

// writeConfigMap writes a Kubernetes ConfigMap of OUTBOUND_SYSTEMS, with
// every other non-secret variable (the registry's, then the systems')
// listed at its baseline default but commented out: a value set in the ConfigMap would override the defaults the
// service declares in code (config.System.Defaults), which this command
// cannot see. The output depends only on its arguments, so a checked-in
// ConfigMap can be compared to it.
func writeConfigMap(w io.Writer, name string, names []string, vars []config.Var) {
	fmt.Fprintf(w, "# ConfigMap of the outbound clients; generated by:\n#   outbound env --format configmap --name %s\n", name)
	fmt.Fprint(w, "# Every non-secret variable is listed at its baseline default, commented\n"+
		"# out: uncomment a line to override it. Left set, a baseline value would\n"+
		"# override the defaults the service declares in code.\n")
	var secrets []string
	for _, v := range vars {
		if v.Secret {
			secrets = append(secrets, v.Name)
		}
	}
	if len(secrets) > 0 {
		fmt.Fprint(w, "# Secret variables are left out: they may carry credentials (URL\n"+
			"# userinfo, passwords, tokens), so set these in a Secret and give the\n"+
			"# pod both (envFrom: configMapRef and secretRef):\n")
		for _, s := range secrets {
			fmt.Fprintf(w, "#   %s\n", s)
		}
	}
	fmt.Fprintf(w, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n", name)
	system := ""
	for _, v := range vars {
		if v.System != system {
			system = v.System
			fmt.Fprintf(w, "  # %s\n", system)
		}
		switch {
		case v.Secret:
		case v.System == "" && v.Name == systemsVar:
			fmt.Fprintf(w, "  %s: %s\n", v.Name, yamlQuote(setTo(v, names)))
		default:
			fmt.Fprintf(w, "  # %s: %s\n", v.Name, yamlQuote(v.Default))
		}
	}
}

// yamlQuote returns s as a YAML double-quoted scalar. For printable ASCII
// that is s with `"` and `\` escaped; anything else is escaped the way Go
// does (\n, \x00, \u00e9), which YAML's double-quoted style reads the same.
// Invalid UTF-8 becomes U+FFFD, because YAML's \xNN is a code point, not a
// byte.
func yamlQuote(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strconv.QuoteToASCII(s)
}
