package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testSystems are the systems the tests declare.
var testSystems = []string{"payments", "inventory"}

// cleanEnv unsets, for the duration of t, OUTBOUND_SYSTEMS and every
// variable under a test system's prefix, so that the caller's environment
// cannot change the results, then sets kv (alternating names and values).
func cleanEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		if k == config.SystemsVar || strings.HasPrefix(k, "OUTBOUND_FLEET_") || slices.ContainsFunc(testSystems, func(s string) bool {
			return strings.HasPrefix(k, config.Prefix(s)+"_")
		}) {
			t.Setenv(k, "") // restores the old value after the test
			os.Unsetenv(k)
		}
	}
	if len(kv)%2 != 0 {
		t.Fatalf("cleanEnv: odd number of arguments")
	}
	for i := 0; i < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

// unsetEnv unsets k for the duration of t.
func unsetEnv(t *testing.T, k string) {
	t.Helper()
	t.Setenv(k, "")
	os.Unsetenv(k)
}

// runOut runs the command line and returns its exit code and output.
func runOut(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

var goodEnv = []string{
	config.SystemsVar, "payments,inventory",
	"PAYMENTS_BASE_URL", "https://pay.internal:8443/v1",
	"INVENTORY_BASE_URL", "http://inventory.internal",
}

// badEnv has several problems in each of two systems, a secret in a URL
// and a typo.
var badEnv = []string{
	config.SystemsVar, "payments,inventory",
	"PAYMENTS_BASE_URL", "https://user:s3cret@pay.internal/v1?token=abc",
	"PAYMENTS_CALL_TIMEOUT", "3s",
	"PAYMENTS_READ_TIMEOUT", "5s",
	"PAYMENTS_CONECT_TIMEOUT", "1s",
	"INVENTORY_READ_TIMEOUT", "abc",
	"INVENTORY_RETRIES", "99",
	"INVENTORY_FOLLOW_REDIRECTS", "sometimes",
}

// badVars are the variables badEnv gets wrong.
var badVars = []string{
	"PAYMENTS_CALL_TIMEOUT",
	"PAYMENTS_CONECT_TIMEOUT",
	"INVENTORY_BASE_URL",
	"INVENTORY_READ_TIMEOUT",
	"INVENTORY_RETRIES",
	"INVENTORY_FOLLOW_REDIRECTS",
}

func TestCheckGood(t *testing.T) {
	cleanEnv(t, goodEnv...)
	code, out, errOut := runOut(t, "check")
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), out)
	}
	for i, name := range testSystems {
		if !strings.HasPrefix(lines[i], "ok   "+name+" ") {
			t.Errorf("line %d = %q, want an ok line for %s", i, lines[i], name)
		}
	}
	if lines[2] != "2 systems, 0 problems" {
		t.Errorf("last line = %q", lines[2])
	}
	if errOut != "" {
		t.Errorf("stderr: %q", errOut)
	}
}

func TestCheckBad(t *testing.T) {
	cleanEnv(t, badEnv...)
	code, out, _ := runOut(t, "check")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	for _, v := range badVars {
		if !strings.Contains(out, "\n  "+v) {
			t.Errorf("output does not name %s:\n%s", v, out)
		}
	}
	for _, name := range testSystems {
		if !strings.Contains(out, "FAIL "+name+" ") {
			t.Errorf("no FAIL line for %s:\n%s", name, out)
		}
	}
	for _, secret := range []string{"s3cret", "token=abc", "user:"} {
		if strings.Contains(out, secret) {
			t.Errorf("output leaks %q:\n%s", secret, out)
		}
	}
	want := "2 systems, " + plural(len(badVars), "problem") + "\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("output does not end with %q:\n%s", want, out)
	}
}

func TestCheckJSON(t *testing.T) {
	cleanEnv(t, badEnv...)
	code, out, _ := runOut(t, "check", "--json")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var r struct {
		Valid   bool `json:"valid"`
		Systems []struct {
			Name   string       `json:"name"`
			Prefix string       `json:"prefix"`
			OK     bool         `json:"ok"`
			Vars   []config.Var `json:"vars"`
		} `json:"systems"`
		Problems []config.Problem `json:"problems"`
		Warnings []config.Problem `json:"warnings"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	if dec.More() {
		t.Errorf("more than one JSON value")
	}
	if r.Valid {
		t.Errorf("valid = true")
	}
	if len(r.Systems) != 2 || r.Systems[0].Name != "payments" || r.Systems[1].Prefix != "INVENTORY" {
		t.Fatalf("systems = %+v", r.Systems)
	}
	nvars := len(config.Reference(config.System{Name: "payments"}))
	for _, s := range r.Systems {
		if s.OK {
			t.Errorf("system %s ok = true", s.Name)
		}
		if len(s.Vars) != nvars {
			t.Errorf("system %s has %d vars, want %d", s.Name, len(s.Vars), nvars)
		}
	}
	var got []string
	for _, p := range r.Problems {
		got = append(got, p.Var)
		if p.System == "" {
			t.Errorf("problem %+v has no system", p)
		}
	}
	for _, v := range badVars {
		if !slices.Contains(got, v) {
			t.Errorf("problems do not name %s: %v", v, got)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("JSON leaks the password")
	}

	// A valid environment: valid=true, problems=[] (not null).
	cleanEnv(t, goodEnv...)
	code, out, _ = runOut(t, "check", "-json")
	if code != 0 {
		t.Fatalf("good env: exit %d, want 0", code)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if m["valid"] != true {
		t.Errorf("valid = %v", m["valid"])
	}
	if p, ok := m["problems"].([]any); !ok || len(p) != 0 {
		t.Errorf("problems = %#v, want []", m["problems"])
	}
}

func TestCheckSystemFlag(t *testing.T) {
	// payments given both ways counts once; inventory only by flag.
	cleanEnv(t,
		config.SystemsVar, "payments",
		"PAYMENTS_BASE_URL", "https://pay.internal",
		"INVENTORY_BASE_URL", "https://inv.internal")
	code, out, errOut := runOut(t, "check", "--system", "payments", "--system", "inventory,payments")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.HasSuffix(out, "2 systems, 0 problems\n") {
		t.Errorf("output:\n%s", out)
	}

	// Only by flag, with OUTBOUND_SYSTEMS unset.
	unsetEnv(t, config.SystemsVar)
	if code, out, _ := runOut(t, "check", "--system", "inventory"); code != 0 || !strings.HasPrefix(out, "ok   inventory ") {
		t.Errorf("exit %d:\n%s", code, out)
	}

	// A bad name given by flag is reported as --system, not as "code".
	code, out, _ = runOut(t, "check", "--system", "Bad", "--system", "inventory")
	if code != 1 || !strings.Contains(out, "\n  --system=Bad: ") || strings.Contains(out, "code") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	cleanEnv(t, goodEnv...)
	for _, args := range [][]string{
		{},
		{"nope"},
		{"-x"},
		{"check", "--bogus"},
		{"check", "extra"},
		{"check", "--system", ""},
		{"env", "--format", "yaml"},
		{"env", "--name", "x"}, // --name without --format configmap
		{"env", "--format", "configmap", "--name", "Not_A_Name"},
		{"help", "nope"},
	} {
		code, out, errOut := runOut(t, args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if errOut == "" {
			t.Errorf("%q: nothing on stderr", args)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", args, out)
		}
	}
}

func TestNoSystems(t *testing.T) {
	for _, env := range []string{"", " , ,"} {
		cleanEnv(t, config.SystemsVar, env)
		for _, cmd := range []string{"check", "env"} {
			code, _, errOut := runOut(t, cmd)
			if code != 2 {
				t.Errorf("%s with %s=%q: exit %d, want 2", cmd, config.SystemsVar, env, code)
			}
			if !strings.Contains(errOut, config.SystemsVar) || !strings.Contains(errOut, "--system") {
				t.Errorf("%s: message %q does not say how to declare a system", cmd, errOut)
			}
		}
	}
	unsetEnv(t, config.SystemsVar)
	if code, _, _ := runOut(t, "check", "--json"); code != 2 {
		t.Errorf("check --json with %s unset: exit %d, want 2", config.SystemsVar, code)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, _ := runOut(t, args...)
		if code != 0 {
			t.Errorf("%q: exit %d, want 0", args, code)
		}
		for _, c := range commands() {
			if !strings.Contains(out, "\n  "+c.name+" ") {
				t.Errorf("%q: usage does not list %s:\n%s", args, c.name, out)
			}
		}
	}
	for _, args := range [][]string{{"check", "-h"}, {"env", "--help"}} {
		if code, _, errOut := runOut(t, args...); code != 0 || !strings.Contains(errOut, "Usage: outbound "+args[0]) {
			t.Errorf("%q: exit %d, stderr:\n%s", args, code, errOut)
		}
	}
	if code, out, _ := runOut(t, "help", "env"); code != 0 || !strings.Contains(out, "-format") {
		t.Errorf("help env: exit %d:\n%s", code, out)
	}
	if _, ok := lookup("demo"); !ok {
		t.Errorf("no demo command")
	}
}

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
	ref := append(config.GlobalReference(), config.Reference(config.System{Name: "inventory"}, config.System{Name: "payments"})...)
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
	var want []string
	for _, v := range append(config.GlobalReference(), config.Reference(config.System{Name: "payments"}, config.System{Name: "inventory"})...) {
		if strings.HasPrefix(v.Setting, "Fault") {
			// Drills: listed commented out, since set they need
			// OUTBOUND_FAULTS=on.
			if !strings.Contains(out, "\n# "+v.Name+"=") {
				t.Errorf("%s is not listed commented out", v.Name)
			}
			continue
		}
		want = append(want, v.Name)
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

// TestBinary builds the command and checks the exit codes of the real
// process, which is what an initContainer sees.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "outbound")
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want int
	}{
		{"valid", []string{"check"}, goodEnv, 0},
		{"invalid", []string{"check"}, badEnv, 1},
		{"no systems", []string{"check"}, nil, 2},
		{"unknown command", []string{"chek"}, goodEnv, 2},
		{"env", []string{"env", "--format", "configmap"}, goodEnv, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = []string{} // only what the test sets
			for i := 0; i < len(tc.env); i += 2 {
				cmd.Env = append(cmd.Env, tc.env[i]+"="+tc.env[i+1])
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.want, stdout.String(), stderr.String())
			}
		})
	}
}

// TestIssue10CheckEscapesControlCharacters: a CR/LF in a value forged an
// "ok" line in `outbound check` (issue #10, item 11).
func TestIssue10CheckEscapesControlCharacters(t *testing.T) {
	cleanEnv(t, config.SystemsVar, "payments",
		"PAYMENTS_BASE_URL", "https://pay.internal/v1\nok   inventory all good\x1b[2J",
		"PAYMENTS_FOLLOW_REDIRECTS", "any\r\nok   forged",
	)
	code, out, _ := runOut(t, "check")
	if code != exitInvalid {
		t.Errorf("exit %d, want %d", code, exitInvalid)
	}
	if strings.Contains(out, "\nok   ") || strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("a value forged a line or holds an escape:\n%q", out)
	}
}

// TestIssue16CheckListsForeignVariables: the SDK's own STRIPE_SECRET_KEY
// made check fail; now it is listed as not outbound's, value unseen.
func TestIssue16CheckListsForeignVariables(t *testing.T) {
	cleanEnv(t, config.SystemsVar, "payments",
		"PAYMENTS_BASE_URL", "https://pay.internal/v1",
		"PAYMENTS_SECRET_KEY", "sk_live_hunter2",
		"PAYMENTS_WEBHOOK_SECRET", "whsec_hunter2",
	)
	code, out, errOut := runOut(t, "check")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "not outbound's, ignored: PAYMENTS_SECRET_KEY, PAYMENTS_WEBHOOK_SECRET\n") {
		t.Errorf("no list of ignored variables:\n%s", out)
	}
	code, out, _ = runOut(t, "check", "--json")
	if code != exitOK || !strings.Contains(out, `"ignored": [`) {
		t.Errorf("exit %d; JSON has no ignored list:\n%s", code, out)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("a value of a foreign variable is shown:\n%s", out)
	}
}
