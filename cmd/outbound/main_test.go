package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/config"
)

// runAsOutbound, set in the environment of a copy of the test binary,
// makes that copy run the command's main (TestBinary): the real process
// and its exit code, without building the command.
const runAsOutbound = "GO_TEST_RUN_OUTBOUND_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsOutbound) == "1" {
		main() // exits
	}
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

// TestBinary checks the exit codes of the real process, which is what an
// initContainer or a CI step sees: main maps run's code to the exit
// status. The process is this test binary, re-executed to run main
// (TestMain), so the test builds nothing: a "go build" here took minutes
// on a cold build cache and a busy machine.
func TestBinary(t *testing.T) {
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
			cmd := exec.CommandContext(t.Context(), os.Args[0], tc.args...)
			// Only what the test sets; GORACE: no 1 s pause at exit under -race.
			cmd.Env = []string{runAsOutbound + "=1", "GORACE=atexit_sleep_ms=0"}
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
