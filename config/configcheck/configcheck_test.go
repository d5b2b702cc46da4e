package configcheck_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/config/configcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// payments declares a slow provider in code: a 20s read, so a 23s call
// at least (connect 2s + read 20s + 1s).
var payments = config.System{Name: "payments", Defaults: config.Client{ReadTimeout: 20 * time.Second, CallTimeout: 30 * time.Second}}

// run runs the check command of a service that declares systems, over
// env, and returns its exit code and output.
func run(t *testing.T, env map[string]string, args []string, systems ...config.System) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	c := configcheck.Command{Name: "svc check-config", Systems: systems, Env: env, Stdout: &out, Stderr: &errb}
	code = c.Run(t.Context(), args)
	return code, out.String(), errb.String()
}

// TestCheckKnowsTheServiceCodeDefaults: PAYMENTS_CALL_TIMEOUT=15s passes
// `outbound check`, which knows only the baseline's 10s read, and stops a
// service whose code declares a 20s read. The service's own check, with
// its declared systems, fails it as the service would.
func TestCheckKnowsTheServiceCodeDefaults(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PAYMENTS_BASE_URL": "https://pay.internal", "PAYMENTS_CALL_TIMEOUT": "15s"}
	code, out, errOut := run(t, env, nil, payments)
	if code != configcheck.ExitInvalid {
		t.Fatalf("exit %d, want %d\n%s%s", code, configcheck.ExitInvalid, out, errOut)
	}
	want := "\n  PAYMENTS_CALL_TIMEOUT=15s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 23s; CONNECT_TIMEOUT = 2s, baseline default; READ_TIMEOUT = 20s, code default)\n"
	if !strings.HasPrefix(out, "FAIL payments ") || !strings.Contains(out, want) || !strings.HasSuffix(out, "\n1 system, 1 problem\n") {
		t.Errorf("report:\n%s\nwant a FAIL line, %q and the summary", out, want)
	}
	if strings.Contains(out, "note:") {
		t.Errorf("the service's check says it does not know code defaults:\n%s", out)
	}
	// The service's own 30s call is valid.
	delete(env, "PAYMENTS_CALL_TIMEOUT")
	if code, out, _ := run(t, env, nil, payments); code != configcheck.ExitValid || !strings.Contains(out, " read=20s call=30s ") {
		t.Errorf("code defaults alone: exit %d:\n%s", code, out)
	}
}

// TestCheckExitCodes: 0 valid, 1 invalid, 2 usage (a bad flag, a stray
// argument, no system declared), 0 for -h with the usage on stderr.
func TestCheckExitCodes(t *testing.T) {
	t.Parallel()
	good := map[string]string{"PAYMENTS_BASE_URL": "https://pay.internal"}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		systems []config.System
		want    int
		stderr  string
	}{
		{"valid", good, nil, []config.System{payments}, configcheck.ExitValid, ""},
		{"valid from OUTBOUND_SYSTEMS alone", map[string]string{config.SystemsVar: "payments", "PAYMENTS_BASE_URL": "https://p"}, nil, nil, configcheck.ExitValid, ""},
		{"invalid", map[string]string{"PAYMENTS_BASE_URL": "ftp://p"}, nil, []config.System{payments}, configcheck.ExitInvalid, ""},
		{"bad flag", good, []string{"--bogus"}, []config.System{payments}, configcheck.ExitUsage, "flag provided but not defined"},
		{"no --system here", good, []string{"--system", "x"}, []config.System{payments}, configcheck.ExitUsage, "flag provided but not defined"},
		{"stray argument", good, []string{"extra"}, []config.System{payments}, configcheck.ExitUsage, `unexpected argument "extra"`},
		{"nothing declared", map[string]string{}, nil, nil, configcheck.ExitUsage, "svc check-config: no system declared: set OUTBOUND_SYSTEMS"},
		{"help", good, []string{"-h"}, []config.System{payments}, configcheck.ExitValid, "Usage: svc check-config [--file F] [--json]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, tc.env, tc.args, tc.systems...)
			if code != tc.want || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d, want %d; stderr %q, want %q\nstdout:\n%s", code, tc.want, errOut, tc.stderr, out)
			}
			if tc.want == configcheck.ExitUsage && out != "" {
				t.Errorf("a usage error printed a report:\n%s", out)
			}
		})
	}
}

// TestCheckJSON: --json is one object with the systems' settings as the
// service loads them, code defaults included, and no note.
func TestCheckJSON(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, map[string]string{"PAYMENTS_BASE_URL": "https://u:s3cret@pay.internal"}, []string{"--json"}, payments)
	var r struct {
		Valid   bool `json:"valid"`
		Systems []struct {
			Name string       `json:"name"`
			OK   bool         `json:"ok"`
			Vars []config.Var `json:"vars"`
		} `json:"systems"`
		Problems []config.Problem `json:"problems"`
		Warnings []config.Problem `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != configcheck.ExitValid {
		t.Fatalf("exit %d, decode: %v\n%s", code, err, out)
	}
	var keys map[string]any
	if err := json.Unmarshal([]byte(out), &keys); err != nil || keys["note"] != nil {
		t.Errorf("the report has a note (%v): the service's check knows its code defaults", keys["note"])
	}
	if !r.Valid || len(r.Systems) != 1 || !r.Systems[0].OK || r.Problems == nil || r.Warnings == nil {
		t.Fatalf("report %+v", r)
	}
	for _, v := range r.Systems[0].Vars {
		if v.Name == "PAYMENTS_READ_TIMEOUT" && (v.Value != "20s" || v.Source != "code") {
			t.Errorf("PAYMENTS_READ_TIMEOUT = %s from %s, want 20s from code", v.Value, v.Source)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("the password shows:\n%s", out)
	}
}
