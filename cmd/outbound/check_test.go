package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/config/configcheck"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/internal/checkcmd"
	"github.com/outbound-go/outbound/registry"
)

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
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4 (two systems, the note, the summary):\n%s", len(lines), out)
	}
	for i, name := range testSystems {
		if !strings.HasPrefix(lines[i], "ok   "+name+" ") {
			t.Errorf("line %d = %q, want an ok line for %s", i, lines[i], name)
		}
	}
	if lines[2] != "note: "+codeDefaultsNote || lines[3] != "2 systems, 0 problems" {
		t.Errorf("last lines = %q, %q; want the note and the summary", lines[2], lines[3])
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
		Note     string           `json:"note"`
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
	if code != 1 || !strings.Contains(out, "\n  --system=Bad: ") || strings.Contains(out, "code=") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestCheckQuotesControlCharacters: a CR/LF in a value must not forge an
// "ok" line in `outbound check`, nor an escape steer the terminal.
func TestCheckQuotesControlCharacters(t *testing.T) {
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

// TestCheckListsForeignVariables: the SDK's own STRIPE_SECRET_KEY under a
// system's prefix does not fail check; it is listed as not outbound's,
// its value unseen.
func TestCheckListsForeignVariables(t *testing.T) {
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

// TestCheckJSONShowsTheValueAsGiven: a variable that did not parse is
// reported in --json as given (the default it left in place is not what
// the operator wrote), a secret one redacted.
func TestCheckJSONShowsTheValueAsGiven(t *testing.T) {
	cleanEnv(t, badEnv...)
	_, out, _ := runOut(t, "check", "--json")
	var r checkcmd.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, s := range r.Systems {
		for _, v := range s.Vars {
			got[v.Name] = v.Value
		}
	}
	for name, want := range map[string]string{
		"INVENTORY_READ_TIMEOUT":     "abc",
		"INVENTORY_RETRIES":          "99",
		"INVENTORY_FOLLOW_REDIRECTS": "sometimes",
		"PAYMENTS_BASE_URL":          "https://REDACTED@pay.internal/v1?token=REDACTED",
	} {
		if got[name] != want {
			t.Errorf("--json shows %s = %q, want %q", name, got[name], want)
		}
	}
}

// TestCheckShowsTheRateLimit: check shows a system's rate limit on its
// line (the burst derived when RATE_BURST is 0) and in --json, and names
// every bad rate variable.
func TestCheckShowsTheRateLimit(t *testing.T) {
	cleanEnv(t, append(slices.Clone(goodEnv), "PAYMENTS_RATE_LIMIT", "200/s", "PAYMENTS_RATE_MAX_WAIT", "20ms")...)
	code, out, errOut := runOut(t, "check")
	if code != exitOK || !strings.Contains(out, " rate=200/s burst 10 local wait 20ms") {
		t.Fatalf("exit %d, want 0 and the rate limit on payments' line:\n%s%s", code, out, errOut)
	}
	_, out, _ = runOut(t, "check", "--json")
	if !strings.Contains(out, `"name": "PAYMENTS_RATE_LIMIT",`) || !strings.Contains(out, `"value": "200/s",`) {
		t.Errorf("--json does not show PAYMENTS_RATE_LIMIT=200/s:\n%s", out)
	}

	cleanEnv(t, append(slices.Clone(goodEnv), "PAYMENTS_RATE_LIMIT", "200/sec", "INVENTORY_RATE_BURST", "5",
		"INVENTORY_RATE_SCOPE", "fleet", "PAYMENTS_RATE_MAX_WAIT", "1m")...)
	code, out, _ = runOut(t, "check")
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d:\n%s", code, exitInvalid, out)
	}
	for _, v := range []string{"PAYMENTS_RATE_LIMIT=200/sec: ", "INVENTORY_RATE_BURST=5: needs a rate limit", "INVENTORY_RATE_SCOPE=fleet: ", "PAYMENTS_RATE_MAX_WAIT=1m: must be < CALL_TIMEOUT"} {
		if !strings.Contains(out, "\n  "+v) {
			t.Errorf("output does not name %q:\n%s", v, out)
		}
	}
}

// TestCheckSaysCodeDefaultsAreUnknown: outbound check validates against
// the baseline; its report (text and --json) and its help say plainly
// that a service's code defaults are unknown to it, and point to the
// service's own check.
func TestCheckSaysCodeDefaultsAreUnknown(t *testing.T) {
	cleanEnv(t, goodEnv...)
	_, out, _ := runOut(t, "check")
	if !strings.Contains(out, "\nnote: defaults a service declares in code (config.System.Defaults) are unknown to outbound check") ||
		!strings.Contains(out, "config/configcheck") {
		t.Errorf("the report does not say that code defaults are unknown:\n%s", out)
	}
	_, out, _ = runOut(t, "check", "--json")
	var r checkcmd.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Note != codeDefaultsNote {
		t.Errorf("--json note = %q (%v), want %q", r.Note, err, codeDefaultsNote)
	}
	code, _, help := runOut(t, "check", "-h")
	for _, want := range []string{"not the defaults a", "configcheck.Main(os.Args[2:], systems...)", "check-config"} {
		if code != exitOK || !strings.Contains(help, want) {
			t.Errorf("check -h: exit %d, no %q:\n%s", code, want, help)
		}
	}
}

// TestServiceCheckIsOutboundCheckWithCodeDefaults: a service's own check
// (config/configcheck) prints the report of `outbound check`, text and
// JSON, from the same code, without the note; with the service's code
// defaults it fails what `outbound check` passes.
func TestServiceCheckIsOutboundCheckWithCodeDefaults(t *testing.T) {
	cleanEnv(t, badEnv...)
	service := func(args []string, systems ...config.System) (int, string) {
		var out, errb bytes.Buffer
		code := configcheck.Command{Name: "svc check-config", Systems: systems, Stdout: &out, Stderr: &errb}.Run(t.Context(), args)
		return code, out.String() + errb.String()
	}
	for _, args := range [][]string{nil, {"--json"}} {
		gcode, gout, _ := runOut(t, append([]string{"check"}, args...)...)
		scode, sout := service(args)
		strip := strings.NewReplacer("note: "+codeDefaultsNote+"\n", "", ",\n  \"note\": \""+codeDefaultsNote+"\"", "")
		if gcode != scode || strip.Replace(gout) != sout {
			t.Errorf("check %q: outbound check (exit %d) and the service's check (exit %d) differ beyond the note:\n%s\n----\n%s", args, gcode, scode, gout, sout)
		}
	}

	d := config.Baseline()
	d.ReadTimeout = 20 * time.Second // a slow provider, declared in code
	cleanEnv(t, config.SystemsVar, "payments", "PAYMENTS_BASE_URL", "https://pay.internal", "PAYMENTS_CALL_TIMEOUT", "15s")
	if code, out, _ := runOut(t, "check"); code != exitOK {
		t.Fatalf("outbound check: exit %d, want 0 (it knows the baseline 10s read only):\n%s", code, out)
	}
	code, out := service(nil, config.System{Name: "payments", Defaults: d})
	if code != exitInvalid || !strings.Contains(out, "PAYMENTS_CALL_TIMEOUT=15s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 23s;") {
		t.Errorf("the service's check: exit %d, want 1 naming PAYMENTS_CALL_TIMEOUT:\n%s", code, out)
	}
}

// TestCheckWithoutSystemsNamesTheBaseURLsFound: with no system declared,
// check exits 2 and says how to declare the systems the environment
// seems to mean, naming their BASE_URL variables.
func TestCheckWithoutSystemsNamesTheBaseURLsFound(t *testing.T) {
	cleanEnv(t, "INVENTORY_BASE_URL", "http://inventory.internal")
	unsetEnv(t, config.SystemsVar)
	code, out, errOut := runOut(t, "check")
	want := "outbound check: no system declared: set OUTBOUND_SYSTEMS=inventory or declare config.System{Name: \"inventory\"} in code; found INVENTORY_BASE_URL (or pass --system NAME)\n"
	if code != exitUsage || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errOut, want)
	}
}

// A URL that has no host and no '@' does not parse (the password stands
// where url.Parse wants a port): all of it after the scheme is hidden, in
// the check's report (text and --json), in registry.FromEnv's error and in
// the fleet's.
func TestPasswordOfAURLWithoutHostNeverShows(t *testing.T) {
	const secret = "S3cretPW"
	for _, tc := range []struct{ baseURL, redisURL string }{
		{"https://apiuser:" + secret, "redis://default:" + secret},
		{"https://pay.internal/v1", "rediss://:" + secret},
	} {
		cleanEnv(t, "OUTBOUND_SYSTEMS", "payments",
			"PAYMENTS_BASE_URL", tc.baseURL, "PAYMENTS_BREAKER_SCOPE", "fleet",
			"OUTBOUND_FLEET_REDIS_URL", tc.redisURL, "OUTBOUND_FLEET_NAMESPACE", "checkout")
		for _, args := range [][]string{{"check"}, {"check", "--json"}} {
			code, out, errOut := runOut(t, args...)
			if code != exitInvalid {
				t.Errorf("%v: exit %d, want %d\n%s%s", args, code, exitInvalid, out, errOut)
			}
			if strings.Contains(out+errOut, secret) {
				t.Errorf("%v shows the password:\n%s%s", args, out, errOut)
			}
			if !strings.Contains(out, "OUTBOUND_FLEET_REDIS_URL") {
				t.Errorf("%v does not name OUTBOUND_FLEET_REDIS_URL:\n%s", args, out)
			}
		}
		reg, err := registry.FromEnv()
		if err == nil {
			reg.Close()
			t.Fatalf("registry.FromEnv accepted %q and %q", tc.baseURL, tc.redisURL)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("registry.FromEnv's error shows the password:\n%v", err)
		}
		f, err := fleet.New(context.Background(), fleet.Config{RedisURL: tc.redisURL, Namespace: "checkout"})
		if err == nil {
			f.Close()
			t.Fatalf("fleet.New accepted %q", tc.redisURL)
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "REDACTED") {
			t.Errorf("the fleet's error shows the password or no mark: %v", err)
		}
	}
}

// The check and the fleet read OUTBOUND_FLEET_REDIS_URL with one parser:
// a URL the check passes is one the fleet dials, and one it refuses is
// refused by the fleet at start with the same problem, reason included.
func TestCheckAndFleetGiveOneVerdictOnARedisURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // words of the reason; "": valid
	}{
		{"redis://127.0.0.1:1", ""},
		{"redis://:pw@127.0.0.1:1/3", ""},
		{"redis://127.0.0.1:1?db=2", ""},
		{"rediss://127.0.0.1:1?skip_verify=true", ""},
		{"redis://127.0.0.1:1?cluster=true&addr=127.0.0.1:2", ""},
		{"rediss://127.0.0.1:1/0?cluster=true&skip_verify=false", ""},
		{"redis://127.0.0.1:1?Cluster=true", "options are lower case (cluster=)"},
		{"redis://127.0.0.1:1?foo=bar", "option foo= is unknown"},
		{"redis://127.0.0.1:1?cluster=true&db=3", "a Redis Cluster has only database 0"},
		{"redis://127.0.0.1:1/abc", "the path is the database number"},
		{"redis://127.0.0.1:1?dial_timeout=abc", "option dial_timeout= is the fleet's own"},
		{"redis://127.0.0.1:1?skip_verify=true", "skip_verify= is for TLS"},
	} {
		cleanEnv(t, "OUTBOUND_SYSTEMS", "payments",
			"PAYMENTS_BASE_URL", "https://pay.internal/v1", "PAYMENTS_BREAKER_SCOPE", "fleet",
			"OUTBOUND_FLEET_REDIS_URL", tc.url, "OUTBOUND_FLEET_NAMESPACE", "checkout")
		code, out, errOut := runOut(t, "check")
		f, err := fleet.New(context.Background(), fleet.Config{RedisURL: tc.url, Namespace: "checkout"})
		if tc.want == "" {
			if code != exitOK || err != nil {
				t.Errorf("%s: check exit %d, fleet %v; want both to accept it\n%s%s", tc.url, code, err, out, errOut)
			}
			if f != nil {
				f.Close()
			}
			continue
		}
		if f != nil {
			f.Close()
		}
		if code != exitInvalid || err == nil {
			t.Errorf("%s: check exit %d, fleet %v; want both to refuse it\n%s", tc.url, code, err, out)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		problem := strings.TrimSpace(lines[len(lines)-1])
		if !strings.Contains(problem, tc.want) {
			t.Errorf("%s: the fleet says %q, want it to say %q", tc.url, problem, tc.want)
		}
		if !strings.Contains(out, "\n  "+problem+"\n") {
			t.Errorf("%s: the check does not report the fleet's problem %q:\n%s", tc.url, problem, out)
		}
	}
}

// A huge value is shown cut, saying how long it was, in every report: the
// check's text and --json, and registry.FromEnv's error.
func TestHugeValuesAreShownCut(t *testing.T) {
	const mib = 1 << 20
	env := func(n int) []string {
		return []string{"OUTBOUND_SYSTEMS", "payments",
			"PAYMENTS_BASE_URL", "https://pay.internal/" + strings.Repeat("a", n-len("https://pay.internal/")),
			"PAYMENTS_READ_TIMEOUT", strings.Repeat("9", n),
			"PAYMENTS_CONECT_TIMEOUT", strings.Repeat("1", n)}
	}
	for _, args := range [][]string{{"check"}, {"check", "--json"}} {
		cleanEnv(t, env(30)...)
		_, small, _ := runOut(t, args...)
		cleanEnv(t, env(mib)...)
		code, out, errOut := runOut(t, args...)
		if code != exitInvalid {
			t.Errorf("%v: exit %d, want %d", args, code, exitInvalid)
		}
		if n := len(out) + len(errOut); n > len(small)+4<<10 {
			t.Errorf("%v: %d bytes of report for 1 MiB values, %d for 30 bytes; want at most 4 KiB more", args, n, len(small))
		}
		if !strings.Contains(out, "(1048576 bytes)") {
			t.Errorf("%v: the report does not say how long the values were:\n%.2000s", args, out)
		}
	}
	_, err := registry.FromEnv()
	if err == nil {
		t.Fatal("registry.FromEnv accepted a 1 MiB READ_TIMEOUT")
	}
	if n := len(err.Error()); n > 8<<10 || !strings.Contains(err.Error(), "(1048576 bytes)") {
		t.Errorf("registry.FromEnv's error is %d bytes, want at most 8 KiB saying how long the value was:\n%.2000s", n, err)
	}
}
