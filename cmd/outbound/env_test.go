package main

import (
	"bufio"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
)

func TestEnvTable(t *testing.T) {
	cleanEnv(t, config.SystemsVar, "payments")
	code, out, errOut := runOut(t, "env", "--system", "inventory")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if !regexp.MustCompile(`^NAME +TYPE +DEFAULT +RULE +DESCRIPTION$`).MatchString(lines[0]) {
		t.Errorf("header = %q", lines[0])
	}
	ref := config.GlobalReference()
	for _, s := range []config.System{{Name: "inventory"}, {Name: "payments"}} {
		ref = append(append(ref, config.Reference(s)...), config.RouteReference(s)...)
	}
	if len(lines) != 1+len(ref) {
		t.Fatalf("%d lines, want %d", len(lines), 1+len(ref))
	}
	col := strings.Index(lines[0], "TYPE")
	for i, v := range ref { // OUTBOUND_*, then --system first, then OUTBOUND_SYSTEMS
		if !strings.HasPrefix(lines[1+i], v.Name+" ") {
			t.Errorf("line %d = %q, want %s", 1+i, lines[1+i], v.Name)
		}
		if !strings.HasPrefix(lines[1+i][col:], v.Type+" ") {
			t.Errorf("line %q: type not aligned under TYPE", lines[1+i])
		}
	}
}

// parseDotenv checks that every line is blank, a comment or NAME=VALUE and
// returns the assignments in order.
func parseDotenv(t *testing.T, s string) [][2]string {
	t.Helper()
	nameRE := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	var out [][2]string
	sc := bufio.NewScanner(strings.NewReader(s))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !nameRE.MatchString(k) || strings.ContainsAny(v, " \t\"'#") {
			t.Errorf("line %d is not NAME=VALUE: %q", n, line)
			continue
		}
		out = append(out, [2]string{k, v})
	}
	return out
}

func TestEnvDotenvRoundTrip(t *testing.T) {
	cleanEnv(t, config.SystemsVar, "payments,inventory")
	code, out, errOut := runOut(t, "env", "--format", "dotenv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	kvs := parseDotenv(t, out)
	// Set: the declared systems and what must be filled in; every other
	// variable is listed at its default, commented out.
	want := []string{config.SystemsVar}
	for _, v := range append(config.GlobalReference(), config.Reference(config.System{Name: "payments"}, config.System{Name: "inventory"})...) {
		if strings.HasSuffix(v.Name, "_BASE_URL") {
			want = append(want, v.Name)
		} else if v.Name != config.SystemsVar && !strings.Contains(out, "\n# "+v.Name+"="+v.Default+"\n") {
			t.Errorf("%s is not listed at its default, commented out", v.Name)
		}
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv[0])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("variables:\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(out, "# Required. Secret") {
		t.Errorf("BASE_URL is not marked required and secret:\n%s", out)
	}

	// Load the template into a clean environment, add the BASE_URLs:
	// check must pass.
	var env []string
	for _, kv := range kvs {
		env = append(env, kv[0], kv[1])
	}
	env = append(env, "PAYMENTS_BASE_URL", "https://pay.internal", "INVENTORY_BASE_URL", "https://inv.internal")
	cleanEnv(t, env...)
	if code, out, _ := runOut(t, "check"); code != 0 {
		t.Errorf("check of the template: exit %d\n%s", code, out)
	}
	// Without them it fails on exactly the two BASE_URLs.
	cleanEnv(t, env[:len(env)-4]...)
	if code, out, _ := runOut(t, "check"); code != 1 || !strings.HasSuffix(out, "2 systems, 2 problems\n") {
		t.Errorf("check of the template without BASE_URL: exit %d\n%s", code, out)
	}
}

// The dotenv template pins no baseline default: loaded as written, with
// the BASE_URL filled in, a system keeps the defaults its code declares.
func TestEnvDotenvKeepsTheCodeDefaults(t *testing.T) {
	cleanEnv(t, config.SystemsVar, "payments")
	code, out, errOut := runOut(t, "env", "--format", "dotenv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	env := map[string]string{}
	for _, kv := range parseDotenv(t, out) {
		env[kv[0]] = kv[1]
	}
	env["PAYMENTS_BASE_URL"] = "https://pay.internal"
	code20 := config.System{Name: "payments", Defaults: config.Client{ReadTimeout: 20 * time.Second, CallTimeout: 30 * time.Second}}
	loaded, err := config.LoadEnv(env, code20)
	if err != nil {
		t.Fatalf("the template does not load with the code defaults:\n%v", err)
	}
	if c := loaded[0].Client; c.ReadTimeout != 20*time.Second || c.CallTimeout != 30*time.Second {
		t.Errorf("read %v, call %v: the template overrides the code defaults 20s and 30s", c.ReadTimeout, c.CallTimeout)
	}
}

func TestEnvConfigMap(t *testing.T) {
	cleanEnv(t, config.SystemsVar, "payments,inventory")
	code, out, errOut := runOut(t, "env", "--format", "configmap")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, s := range []string{"\napiVersion: v1\n", "\nkind: ConfigMap\n", "\nmetadata:\n  name: outbound-config\n", "\ndata:\n",
		"\n  OUTBOUND_SYSTEMS: \"payments,inventory\"\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("no %q in:\n%s", s, out)
		}
	}
	// Every non-secret variable, with its default quoted and commented
	// out (a set baseline would override the service's code defaults); no
	// secret one outside the header comment.
	body := out[strings.Index(out, "\napiVersion:"):]
	for _, v := range append(config.GlobalReference(), config.Reference(config.System{Name: "payments"}, config.System{Name: "inventory"})...) {
		if v.Name == config.SystemsVar {
			continue // set, above
		}
		line := "\n  # " + v.Name + ": " + `"` + v.Default + `"` + "\n"
		if v.Secret {
			if strings.Contains(body, v.Name) {
				t.Errorf("secret %s is in the data", v.Name)
			}
			if !strings.Contains(out, "#   "+v.Name+"\n") {
				t.Errorf("secret %s is not listed in the header", v.Name)
			}
			continue
		}
		if !strings.Contains(body, line) {
			t.Errorf("no %q", line)
		}
	}
	if strings.Count(body, "BASE_URL") != 0 {
		t.Errorf("BASE_URL in the data:\n%s", body)
	}

	// Deterministic, and named by --name.
	_, again, _ := runOut(t, "env", "--format", "configmap")
	if again != out {
		t.Errorf("two runs differ")
	}
	_, named, _ := runOut(t, "env", "--format=configmap", "--name", "pay.outbound-1")
	if !strings.Contains(named, "\n  name: pay.outbound-1\n") {
		t.Errorf("--name ignored:\n%s", named)
	}
}

func TestEnvBadSystemList(t *testing.T) {
	cleanEnv(t, config.SystemsVar, "payments,Bad,payments")
	code, out, errOut := runOut(t, "env")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if !strings.Contains(errOut, "OUTBOUND_SYSTEMS=Bad") || !strings.Contains(errOut, "listed twice") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

func TestYAMLQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":             `""`,
		"2s":           `"2s"`,
		`a"b\c`:        `"a\"b\\c"`,
		"tab\there":    `"tab\there"`,
		"é":            `"\u00e9"`,
		"bad\xffutf-8": `"bad\ufffdutf-8"`,
	} {
		if got := yamlQuote(in); got != want {
			t.Errorf("yamlQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestEnvGlobalVariables: every format lists the registry's variables
// (OUTBOUND_SYSTEMS, OUTBOUND_FAULTS, OUTBOUND_FLEET_REDIS_URL,
// OUTBOUND_FLEET_NAMESPACE) with the default and rule config states for
// them, the Redis URL as a secret; a Redis password in the environment
// shows in none of them.
func TestEnvGlobalVariables(t *testing.T) {
	const pw = "s3cr3t-pw"
	cleanEnv(t, config.SystemsVar, "payments",
		config.FleetRedisURLVar, "rediss://:"+pw+"@redis.internal:6380/0", config.FleetNamespaceVar, "checkout")
	globals := config.GlobalReference()
	var names []string
	for _, v := range globals {
		names = append(names, v.Name)
	}
	if want := []string{config.SystemsVar, config.FaultsVar, config.FleetRedisURLVar, config.FleetNamespaceVar, config.FileVar}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("GlobalReference lists %v, want %v", names, want)
	}
	out := map[string]string{}
	for _, format := range []string{"table", "dotenv", "configmap"} {
		code, o, errOut := runOut(t, "env", "--format", format)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, errOut)
		}
		if strings.Contains(o, pw) {
			t.Errorf("%s: the Redis password is in the output:\n%s", format, o)
		}
		out[format] = o
	}

	rows := map[string]string{} // table: NAME -> its line
	for _, l := range strings.Split(out["table"], "\n") {
		if name, _, ok := strings.Cut(l, " "); ok {
			rows[name] = l
		}
	}
	for _, v := range globals {
		if v.Rule == "" || v.Description == "" || v.Type == "" {
			t.Errorf("%s: type %q, rule %q, description %q: want all three", v.Name, v.Type, v.Rule, v.Description)
		}
		def := v.Default
		if def == "" {
			def = "-"
		}
		row := rows[v.Name]
		if !strings.Contains(row, " "+v.Type+" ") || !strings.Contains(row, " "+def+" ") || !strings.Contains(row, v.Rule) {
			t.Errorf("table: %s row %q, want type %s, default %s, rule %q", v.Name, row, v.Type, def, v.Rule)
		}
		if v.Secret != strings.HasSuffix(row, "[secret]") {
			t.Errorf("table: %s row %q, secret %v", v.Name, row, v.Secret)
		}

		set := "# " + v.Name + "=" + v.Default
		if v.Name == config.SystemsVar {
			set = v.Name + "=payments"
		}
		if !strings.Contains(out["dotenv"], "; "+v.Rule+")\n") || !strings.Contains(out["dotenv"], "\n"+set+"\n") {
			t.Errorf("dotenv: no rule %q or no line %q", v.Rule, set)
		}

		cm := out["configmap"]
		data := cm[strings.Index(cm, "\ndata:\n"):]
		switch {
		case v.Secret:
			if !strings.Contains(cm, "\n#   "+v.Name+"\n") || strings.Contains(data, v.Name) {
				t.Errorf("configmap: secret %s is not in the header only", v.Name)
			}
		case v.Name == config.SystemsVar:
			if !strings.Contains(data, "\n  "+v.Name+": \"payments\"\n") {
				t.Errorf("configmap: %s is not set to the declared systems", v.Name)
			}
		default:
			if !strings.Contains(data, "\n  # "+v.Name+": \""+v.Default+"\"\n") {
				t.Errorf("configmap: %s is not listed at its default %q", v.Name, v.Default)
			}
		}
	}
	if !globals[2].Secret || globals[2].Name != config.FleetRedisURLVar {
		t.Errorf("%s is not secret", config.FleetRedisURLVar)
	}
}
