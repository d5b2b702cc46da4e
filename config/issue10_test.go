package config_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
)

// loadEnv loads systems from env alone, the process environment aside.
func loadEnv(t *testing.T, env map[string]string, systems ...config.System) ([]config.Loaded, []config.Problem, error) {
	t.Helper()
	ls, err := config.LoadEnv(env, systems...)
	return ls, problemsOf(t, err), err
}

// TestIssue10BaseURLPort: a BASE_URL with port 0 or 99999 passed
// validation, and every call then failed (issue #10, item 12).
func TestIssue10BaseURLPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://payments.internal:0/v1", false},
		{"https://payments.internal:99999/v1", false},
		{"https://payments.internal:65536/", false},
		{"https://payments.internal:1/", true},
		{"https://payments.internal:65535/", true},
		{"https://[::1]:8443/", true},
		{"https://[::1]:0/", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			_, probs, _ := loadEnv(t, map[string]string{"PAYMENTS_BASE_URL": tc.url}, config.System{Name: "payments"})
			p, bad := findVar(probs, "PAYMENTS_BASE_URL")
			if bad == tc.ok {
				t.Fatalf("ok = %v, want %v:%s", !bad, tc.ok, dump(probs))
			}
			if bad && !strings.Contains(p.Rule, "1..65535") {
				t.Errorf("rule %q does not give the port range", p.Rule)
			}
		})
	}
}

// TestIssue10RedactEveryBaseURLQueryValue: the list of secret parameter
// names missed jwt, bearer, otp, hash, private and more (issue #10, item
// 9). Every query value of BASE_URL is now redacted in every output, and
// in request URLs every value whose name is not known to be safe.
func TestIssue10RedactEveryBaseURLQueryValue(t *testing.T) {
	t.Parallel()
	names := []string{"jwt", "bearer", "otp", "hash", "private", "x-amz-credential", "apikey", "state", "nonce"}
	var q []string
	var secrets []string
	for i, n := range names {
		v := fmt.Sprintf("s3cr3t%d", i)
		q = append(q, n+"="+v)
		secrets = append(secrets, v)
	}
	base := "https://payments.internal/v1?" + strings.Join(q, "&") + "&page=2"
	ls, probs, err := loadEnv(t, map[string]string{
		"PAYMENTS_BASE_URL":     base,
		"PAYMENTS_READ_TIMEOUT": "0", // for an error to print
	}, config.System{Name: "payments"})
	if err == nil {
		t.Fatal("no error")
	}
	outputs := map[string]string{
		"err":     err.Error(),
		"Summary": ls[0].Summary(),
		"%v":      fmt.Sprintf("%v", ls[0]),
		"%#v":     fmt.Sprintf("%#v", ls[0].Client),
		"Vars":    fmt.Sprintf("%+v", ls[0].Vars()),
		"probs":   fmt.Sprintf("%+v", probs),
	}
	for where, s := range outputs {
		assertNoSecrets(t, where, s, secrets...)
		assertNoSecrets(t, where, s, "page=2") // a BASE_URL hides even safe names
	}
	if !strings.Contains(ls[0].Summary(), "payments.internal/v1?") {
		t.Errorf("Summary lost the host: %s", ls[0].Summary())
	}

	// A request URL keeps the values of known-safe names only.
	got := config.RedactURL("https://h/x?" + strings.Join(q, "&") + "&page=2&LIMIT=5")
	assertNoSecrets(t, "RedactURL", got, secrets...)
	for _, keep := range []string{"page=2", "LIMIT=5", "jwt=REDACTED"} {
		if !strings.Contains(got, keep) {
			t.Errorf("RedactURL = %q, want %q kept", got, keep)
		}
	}
}

// TestIssue10PasswordWithSlash: "https://user:12/secret@host/v1" parsed as
// host "user", port 12; check said ok and printed the password (issue
// #10, item 10). It is refused now, with a hint to percent-encode, and
// never echoed.
func TestIssue10PasswordWithSlash(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"https://user:12/secret@payments.internal/v1",
		"https://user:12?secret@payments.internal/v1",
		"https://user:12#secret@payments.internal/v1",
		"https://user:12/se/cret@payments.internal/v1",
		"https://user:pa/secret@payments.internal/v1",
	} {
		t.Run(u, func(t *testing.T) {
			t.Parallel()
			ls, probs, err := loadEnv(t, map[string]string{"PAYMENTS_BASE_URL": u}, config.System{Name: "payments"})
			p, ok := findVar(probs, "PAYMENTS_BASE_URL")
			if !ok {
				t.Fatalf("not refused:%s", dump(probs))
			}
			if !strings.Contains(p.Rule, "percent-encode") {
				t.Errorf("rule %q does not say to percent-encode", p.Rule)
			}
			for where, s := range map[string]string{"err": err.Error(), "Summary": ls[0].Summary(), "Value": p.Value} {
				assertNoSecrets(t, where, s, "secret", "user", ":12")
			}
		})
	}
	// An '@' in the path of a URL without a port is not userinfo.
	_, probs, _ := loadEnv(t, map[string]string{"PAYMENTS_BASE_URL": "https://registry.npmjs.org/@types"}, config.System{Name: "payments"})
	if len(probs) != 0 {
		t.Errorf("an '@' in the path is refused:%s", dump(probs))
	}
}

// TestIssue10ControlCharacters: env values were echoed raw, so CR/LF and
// ANSI escapes in a value forged lines in `outbound check` and in config
// errors (issue #10, item 11). Every shown value with a control character
// is quoted now.
func TestIssue10ControlCharacters(t *testing.T) {
	t.Parallel()
	const forged = "\r\nPAYMENTS_FAKE=ok: all good\x1b[2J"
	env := map[string]string{
		"PAYMENTS_BASE_URL":         "https://payments.internal/v1" + forged,
		"PAYMENTS_READ_TIMEOUT":     "5s" + forged,
		"PAYMENTS_FOLLOW_REDIRECTS": "any" + forged,
		"PAYMENTS_TLS_CA_FILE":      "/nonexistent" + forged,
		"PAYMENTS_CONECT_TIMEOUT":   "1s",
	}
	ls, probs, err := loadEnv(t, env, config.System{Name: "payments"})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\x1b") {
		t.Errorf("error holds a CR or an ESC:\n%q", msg)
	}
	if got, want := strings.Count(msg, "\n"), len(probs); got != want {
		t.Errorf("error has %d line breaks, want %d (one per problem):\n%s", got, want, msg)
	}
	for _, s := range []string{ls[0].Summary(), ls[0].String(), fmt.Sprintf("%+v", ls[0].Client)} {
		if strings.ContainsAny(s, "\r\n\x1b") {
			t.Errorf("output holds a control character:\n%q", s)
		}
	}
}

// TestIssue10CrossRuleBlamesTheSetVariable: READ_TIMEOUT=1ns was reported
// on CONNECT_TIMEOUT, still at its baseline (issue #10, item 15). The
// problem now names the variable that was set and shows the other side
// of the rule with its value and source.
func TestIssue10CrossRuleBlamesTheSetVariable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		env      map[string]string
		defaults config.Client
		want     []string // Problem.Error(), in order
	}{
		{"read 1ns", map[string]string{"READ_TIMEOUT": "1ns"}, config.Client{}, []string{
			"PAYMENTS_READ_TIMEOUT=1ns: must be > CONNECT_TIMEOUT (= 2s, baseline default)",
			"PAYMENTS_READ_TIMEOUT=1ns: must be >= TLS_HANDSHAKE_TIMEOUT (= 3s, baseline default)",
		}},
		{"backoff max below the code's base", map[string]string{"BACKOFF_MAX": "50ms"}, config.Client{BackoffBase: 200 * time.Millisecond}, []string{
			"PAYMENTS_BACKOFF_MAX=50ms: must be >= BACKOFF_BASE (= 200ms, code default)",
		}},
		{"call below baseline connect + env read", map[string]string{"CALL_TIMEOUT": "5s", "READ_TIMEOUT": "5s"}, config.Client{}, []string{
			"PAYMENTS_CALL_TIMEOUT=5s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 8s; CONNECT_TIMEOUT = 2s, baseline default; READ_TIMEOUT = 5s, env)",
		}},
		{"connect from env beyond the baseline call", map[string]string{"CONNECT_TIMEOUT": "9s", "READ_TIMEOUT": "9500ms"}, config.Client{}, []string{
			"PAYMENTS_READ_TIMEOUT=9500ms: must be <= CALL_TIMEOUT - CONNECT_TIMEOUT - 1s (= 5s; CALL_TIMEOUT = 15s, baseline default; CONNECT_TIMEOUT = 9s, env)",
		}},
		{"both baseline sides: the field with the tag", map[string]string{"CALL_TIMEOUT": "20s", "BULKHEAD_MAX_WAIT": "20s"}, config.Client{}, []string{
			"PAYMENTS_BULKHEAD_MAX_WAIT=20s: must be < CALL_TIMEOUT (= 20s, env)",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := prefixed("PAYMENTS", tc.env)
			env["PAYMENTS_BASE_URL"] = goodURL
			_, probs, _ := loadEnv(t, env, config.System{Name: "payments", Defaults: tc.defaults})
			var got []string
			for _, p := range probs {
				got = append(got, p.Error())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tc.want, "\n\t"))
			}
		})
	}
}
