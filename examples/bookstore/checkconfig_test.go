package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCheckConfigCommand: `bookstore check-config` checks the environment
// with the code defaults of inventory and payments and exits as `outbound
// check` does: PAYMENTS_CALL_TIMEOUT=15s, which `outbound check` passes
// (baseline read 10s), fails against payments' 20s read from code. The
// test binary runs the service's main in a child process.
func TestCheckConfigCommand(t *testing.T) {
	t.Parallel()
	good := []string{"INVENTORY_BASE_URL=http://inventory.internal", "PAYMENTS_BASE_URL=https://pay.internal"}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want int
		out  string
	}{
		{"valid", []string{"check-config"}, good, 0, "2 systems, 0 problems\n"},
		{"code defaults known", []string{"check-config"}, append(good, "PAYMENTS_CALL_TIMEOUT=15s"), 1,
			"PAYMENTS_CALL_TIMEOUT=15s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 23s;"},
		{"json", []string{"check-config", "--json"}, good, 0, `"valid": true`},
		{"bad flag", []string{"check-config", "--bogus"}, good, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], tc.args...)
			// GORACE: no 1 s pause at exit under -race.
			cmd.Env = append([]string{runAsBookstore + "=1", "GORACE=atexit_sleep_ms=0"}, tc.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want || !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("bookstore %s: exit %d, want %d and %q\nstdout:\n%s\nstderr:\n%s",
					strings.Join(tc.args, " "), code, tc.want, tc.out, stdout.String(), stderr.String())
			}
		})
	}
}
