package config_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
)

// testPrefixes are the variable prefixes the tests (and the example, the
// fuzz target and the benchmark) use. TestMain unsets whatever the
// surrounding environment has under them, so the tests start from a known
// environment. Most tests give each load its own environment
// (config.LoadEnv) and run in parallel; the few that test Load's reading
// of the process environment itself use setEnv (t.Setenv) and do not.
var testPrefixes = []string{"OUTBOUND_", "PAYMENTS", "INVENTORY", "ORDER_HISTORY", "SHIPPING", "LEDGER", "SYS"}

func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		for _, p := range testPrefixes {
			if strings.HasPrefix(k, p) {
				os.Unsetenv(k)
			}
		}
	}
	goleak.VerifyTestMain(m)
}

const goodURL = "https://payments.internal:8443/v1"

// setEnv sets every KEY=VALUE of env for the duration of the test.
func setEnv(t testing.TB, env map[string]string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// prefixed turns {"READ_TIMEOUT": "5s"} into {"PAYMENTS_READ_TIMEOUT": "5s"}.
func prefixed(prefix string, env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[prefix+"_"+k] = v
	}
	return out
}

// problemsOf returns the problems of err, which must be a *config.Error
// (or nil, for no problems).
func problemsOf(t testing.TB, err error) []config.Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T (%v), want *config.Error", err, err)
	}
	if !errors.Is(err, config.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	return ce.Problems
}

// loadPayments loads the single system "payments" with a good BASE_URL
// and the given suffix -> value settings (which may override BASE_URL).
func loadPayments(t *testing.T, defaults config.Client, env map[string]string) (config.Loaded, []config.Problem) {
	t.Helper()
	all := map[string]string{"BASE_URL": goodURL}
	for k, v := range env {
		all[k] = v
	}
	lenv := prefixed("PAYMENTS", all)
	ls, err := config.LoadEnv(lenv, config.System{Name: "payments", Defaults: defaults})
	probs := problemsOf(t, err)
	if len(ls) != 1 {
		t.Fatalf("Load returned %d systems, want 1 (err: %v)", len(ls), err)
	}
	return ls[0], probs
}

// loadEnv loads systems from env alone, the process environment aside.
func loadEnv(t *testing.T, env map[string]string, systems ...config.System) ([]config.Loaded, []config.Problem, error) {
	t.Helper()
	ls, err := config.LoadEnv(env, systems...)
	return ls, problemsOf(t, err), err
}

func dump(probs []config.Problem) string {
	var b strings.Builder
	for _, p := range probs {
		b.WriteString("\n\t")
		b.WriteString(p.Error())
	}
	return b.String()
}

func vars(probs []config.Problem) []string {
	out := make([]string, len(probs))
	for i, p := range probs {
		out[i] = p.Var
	}
	return out
}

func findVar(probs []config.Problem, name string) (config.Problem, bool) {
	for _, p := range probs {
		if p.Var == name {
			return p, true
		}
	}
	return config.Problem{}, false
}

// assertNoSecrets fails the test for every secret that appears in s.
func assertNoSecrets(t testing.TB, where, s string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Errorf("%s leaks secret %q:\n%s", where, sec, s)
		}
	}
}

// tlsFiles writes a self-signed certificate, valid now, and its key to a
// temporary directory and returns their paths. The certificate also serves
// as a CA bundle. (Load reads the TLS files, so they must be real.)
func tlsFiles(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := testutil.SelfSigned(t, testutil.Leaf{CN: "config test", NotAfter: time.Now().Add(365 * 24 * time.Hour)})
	dir := t.TempDir()
	return testutil.WriteFile(t, dir, "client.crt", certPEM), testutil.WriteFile(t, dir, "client.key", keyPEM)
}

// ruleCase is one environment that must produce exactly one problem.
type ruleCase struct {
	name     string
	env      map[string]string // suffix -> value, for system payments
	wantVar  string            // suffix
	wantRule string            // substring of the rule
	exact    string            // if set, the whole Problem.Error()
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, probs := loadPayments(t, config.Client{}, tc.env)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want exactly 1 on PAYMENTS_%s:%s", len(probs), tc.wantVar, dump(probs))
			}
			p := probs[0]
			if got, want := p.Var, "PAYMENTS_"+tc.wantVar; got != want {
				t.Errorf("problem on %s, want %s: %s", got, want, p.Error())
			}
			if p.System != "payments" {
				t.Errorf("problem system = %q, want payments", p.System)
			}
			if p.Rule == "" || !strings.Contains(p.Rule, tc.wantRule) {
				t.Errorf("rule = %q, want it to contain %q", p.Rule, tc.wantRule)
			}
			if tc.exact != "" && p.Error() != tc.exact {
				t.Errorf("got  %q\nwant %q", p.Error(), tc.exact)
			}
		})
	}
}

func TestSingleFieldRules(t *testing.T) {
	t.Parallel()
	const noTimeout = "must be > 0 (0 or less would mean no timeout"
	cases := []ruleCase{
		// BASE_URL
		{name: "base url empty", env: map[string]string{"BASE_URL": ""}, wantVar: "BASE_URL", wantRule: "required"},
		{name: "base url ftp", env: map[string]string{"BASE_URL": "ftp://x"}, wantVar: "BASE_URL", wantRule: "absolute http or https URL",
			exact: "PAYMENTS_BASE_URL=ftp://x: must be an absolute http or https URL (e.g. https://payments.internal:8443/v1)"},
		{name: "base url without scheme", env: map[string]string{"BASE_URL": "payments.internal"}, wantVar: "BASE_URL", wantRule: "absolute http or https URL"},
		{name: "base url mailto", env: map[string]string{"BASE_URL": "mailto:ops@example.com"}, wantVar: "BASE_URL", wantRule: "absolute http or https URL"},
		{name: "base url host:port without scheme", env: map[string]string{"BASE_URL": "localhost:8080"}, wantVar: "BASE_URL", wantRule: "the scheme is missing: start it with https:// or http://"},
		{name: "base url no host", env: map[string]string{"BASE_URL": "https://"}, wantVar: "BASE_URL", wantRule: "must name a host"},
		{name: "base url port only", env: map[string]string{"BASE_URL": "https://:8443/v1"}, wantVar: "BASE_URL", wantRule: "must name a host"},
		{name: "base url fragment", env: map[string]string{"BASE_URL": "https://h/v1#top"}, wantVar: "BASE_URL", wantRule: "must not have a fragment"},
		{name: "base url empty fragment", env: map[string]string{"BASE_URL": "https://h/v1#"}, wantVar: "BASE_URL", wantRule: "must not have a fragment"},
		{name: "base url not a URL", env: map[string]string{"BASE_URL": "https://h/%zz"}, wantVar: "BASE_URL", wantRule: "not a URL"},

		// READ_TIMEOUT upper bound.
		{name: "read 61s", env: map[string]string{"READ_TIMEOUT": "61s", "CALL_TIMEOUT": "2m"}, wantVar: "READ_TIMEOUT", wantRule: "must be <= 60s: a synchronous call should not wait longer for its response; make the call asynchronous (202 Accepted + polling)"},

		// Integers.
		{name: "max concurrent 0", env: map[string]string{"MAX_CONCURRENT": "0"}, wantVar: "MAX_CONCURRENT", wantRule: "must be between 1 and 10000",
			exact: "PAYMENTS_MAX_CONCURRENT=0: must be between 1 and 10000"},
		{name: "max concurrent 10001", env: map[string]string{"MAX_CONCURRENT": "10001"}, wantVar: "MAX_CONCURRENT", wantRule: "must be between 1 and 10000"},
		{name: "retries -1", env: map[string]string{"RETRIES": "-1"}, wantVar: "RETRIES", wantRule: "must be between 0 and 10"},
		{name: "retries 11", env: map[string]string{"RETRIES": "11"}, wantVar: "RETRIES", wantRule: "must be between 0 and 10"},
		{name: "retry budget min -1", env: map[string]string{"RETRY_BUDGET_MIN_PER_SEC": "-1"}, wantVar: "RETRY_BUDGET_MIN_PER_SEC", wantRule: "must be between 0 and 10000"},
		{name: "retry budget min 10001", env: map[string]string{"RETRY_BUDGET_MIN_PER_SEC": "10001"}, wantVar: "RETRY_BUDGET_MIN_PER_SEC", wantRule: "must be between 0 and 10000"},
		{name: "breaker min requests 0", env: map[string]string{"BREAKER_MIN_REQUESTS": "0"}, wantVar: "BREAKER_MIN_REQUESTS", wantRule: "must be between 1 and 100000"},
		{name: "breaker min requests 100001", env: map[string]string{"BREAKER_MIN_REQUESTS": "100001"}, wantVar: "BREAKER_MIN_REQUESTS", wantRule: "must be between 1 and 100000"},
		{name: "half open probes 0", env: map[string]string{"BREAKER_HALF_OPEN_PROBES": "0"}, wantVar: "BREAKER_HALF_OPEN_PROBES", wantRule: "must be between 1 and 1000"},
		{name: "half open probes 1001", env: map[string]string{"BREAKER_HALF_OPEN_PROBES": "1001"}, wantVar: "BREAKER_HALF_OPEN_PROBES", wantRule: "must be between 1 and 1000"},
		{name: "max redirects 21", env: map[string]string{"MAX_REDIRECTS": "21"}, wantVar: "MAX_REDIRECTS", wantRule: "must be between 0 and 20"},
		{name: "max redirects -1", env: map[string]string{"MAX_REDIRECTS": "-1"}, wantVar: "MAX_REDIRECTS", wantRule: "must be between 0 and 20"},

		// Other durations.
		{name: "breaker window 500ms", env: map[string]string{"BREAKER_WINDOW": "500ms"}, wantVar: "BREAKER_WINDOW", wantRule: "must be >= 1s"},
		{name: "breaker window 2h", env: map[string]string{"BREAKER_WINDOW": "2h"}, wantVar: "BREAKER_WINDOW", wantRule: "must be <= 1h"},
		{name: "breaker open 2h", env: map[string]string{"BREAKER_OPEN_TIMEOUT": "2h"}, wantVar: "BREAKER_OPEN_TIMEOUT", wantRule: "must be <= 1h"},
		{name: "idle conn 11m", env: map[string]string{"IDLE_CONN_TIMEOUT": "11m"}, wantVar: "IDLE_CONN_TIMEOUT", wantRule: "must be <= 10m",
			exact: "PAYMENTS_IDLE_CONN_TIMEOUT=11m: must be <= 10m"},
		{name: "backoff base 0", env: map[string]string{"BACKOFF_BASE": "0"}, wantVar: "BACKOFF_BASE", wantRule: "must be > 0"},
		{name: "backoff max 0", env: map[string]string{"BACKOFF_MAX": "0"}, wantVar: "BACKOFF_MAX", wantRule: "must be > 0"},
		{name: "retry after max 0", env: map[string]string{"RETRY_AFTER_MAX": "0"}, wantVar: "RETRY_AFTER_MAX", wantRule: "must be > 0"},
		{name: "bulkhead wait negative", env: map[string]string{"BULKHEAD_MAX_WAIT": "-1s"}, wantVar: "BULKHEAD_MAX_WAIT", wantRule: "must be >= 0"},

		// Strings.
		{name: "follow redirects sometimes", env: map[string]string{"FOLLOW_REDIRECTS": "sometimes"}, wantVar: "FOLLOW_REDIRECTS", wantRule: "must be one of: none, same-host, any"},
		{name: "tls min 1.1", env: map[string]string{"TLS_MIN_VERSION": "1.1"}, wantVar: "TLS_MIN_VERSION", wantRule: "must be one of: 1.2, 1.3"},
		{name: "tls min empty", env: map[string]string{"TLS_MIN_VERSION": ""}, wantVar: "TLS_MIN_VERSION", wantRule: "must be one of: 1.2, 1.3"},
		{name: "tls server name", env: map[string]string{"TLS_SERVER_NAME": "bad name!"}, wantVar: "TLS_SERVER_NAME", wantRule: "must be a host name",
			exact: "PAYMENTS_TLS_SERVER_NAME=bad name!: must be a host name"},
	}
	// Every timeout, zero and negative. Each case keeps the others valid.
	for _, suffix := range []string{"CONNECT_TIMEOUT", "TLS_HANDSHAKE_TIMEOUT", "READ_TIMEOUT", "CALL_TIMEOUT", "IDLE_CONN_TIMEOUT", "BREAKER_OPEN_TIMEOUT"} {
		for _, v := range []string{"0", "0s", "-1s", "-1ns"} {
			cases = append(cases, ruleCase{name: suffix + "=" + v, env: map[string]string{suffix: v}, wantVar: suffix, wantRule: noTimeout})
		}
	}
	// Both ratios.
	for _, suffix := range []string{"RETRY_BUDGET_RATIO", "BREAKER_FAILURE_RATIO"} {
		cases = append(cases,
			ruleCase{name: suffix + "=0", env: map[string]string{suffix: "0"}, wantVar: suffix, wantRule: "must be > 0"},
			ruleCase{name: suffix + "=-0.1", env: map[string]string{suffix: "-0.1"}, wantVar: suffix, wantRule: "must be > 0",
				exact: "PAYMENTS_" + suffix + "=-0.1: must be > 0"},
			ruleCase{name: suffix + "=1.5", env: map[string]string{suffix: "1.5"}, wantVar: suffix, wantRule: "must be <= 1"},
			ruleCase{name: suffix + "=1.0000001", env: map[string]string{suffix: "1.0000001"}, wantVar: suffix, wantRule: "must be <= 1"},
		)
	}
	runRuleCases(t, cases)
}

func TestCrossRules(t *testing.T) {
	t.Parallel()
	cert, key := tlsFiles(t)
	runRuleCases(t, []ruleCase{
		{name: "connect == read", env: map[string]string{"CONNECT_TIMEOUT": "5s", "READ_TIMEOUT": "5s", "CALL_TIMEOUT": "11s"},
			wantVar: "CONNECT_TIMEOUT", wantRule: "must be < READ_TIMEOUT (= 5s, env)", exact: "PAYMENTS_CONNECT_TIMEOUT=5s: must be < READ_TIMEOUT (= 5s, env)"},
		{name: "connect > read", env: map[string]string{"CONNECT_TIMEOUT": "6s", "READ_TIMEOUT": "5s", "CALL_TIMEOUT": "12s"},
			wantVar: "CONNECT_TIMEOUT", wantRule: "must be < READ_TIMEOUT (= 5s, env)"},
		{name: "connect > baseline read", env: map[string]string{"CONNECT_TIMEOUT": "11s", "CALL_TIMEOUT": "30s"},
			wantVar: "CONNECT_TIMEOUT", wantRule: "must be < READ_TIMEOUT (= 10s, baseline default)"},
		{name: "call < connect+read+1s", env: map[string]string{"CONNECT_TIMEOUT": "2s", "READ_TIMEOUT": "5s", "CALL_TIMEOUT": "3s"},
			wantVar: "CALL_TIMEOUT", exact: "PAYMENTS_CALL_TIMEOUT=3s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 8s; CONNECT_TIMEOUT = 2s, env; READ_TIMEOUT = 5s, env)"},
		{name: "call one ns short", env: map[string]string{"CONNECT_TIMEOUT": "2s", "READ_TIMEOUT": "5s", "CALL_TIMEOUT": "7999999999ns"},
			wantVar: "CALL_TIMEOUT", wantRule: "(= 8s;"},
		// Reported on the variable that was set, not on its baseline side.
		{name: "baseline call < env read", env: map[string]string{"READ_TIMEOUT": "30s"},
			wantVar: "READ_TIMEOUT", exact: "PAYMENTS_READ_TIMEOUT=30s: must be <= CALL_TIMEOUT - CONNECT_TIMEOUT - 1s (= 12s; CALL_TIMEOUT = 15s, baseline default; CONNECT_TIMEOUT = 2s, baseline default)"},
		{name: "tls > read", env: map[string]string{"TLS_HANDSHAKE_TIMEOUT": "6s", "READ_TIMEOUT": "5s"},
			wantVar: "TLS_HANDSHAKE_TIMEOUT", exact: "PAYMENTS_TLS_HANDSHAKE_TIMEOUT=6s: must be <= READ_TIMEOUT (= 5s, env)"},
		{name: "backoff base > max", env: map[string]string{"BACKOFF_BASE": "3s", "BACKOFF_MAX": "2s"},
			wantVar: "BACKOFF_BASE", exact: "PAYMENTS_BACKOFF_BASE=3s: must be <= BACKOFF_MAX (= 2s, env)"},
		{name: "bulkhead wait == call", env: map[string]string{"BULKHEAD_MAX_WAIT": "15s"},
			wantVar: "BULKHEAD_MAX_WAIT", exact: "PAYMENTS_BULKHEAD_MAX_WAIT=15s: must be < CALL_TIMEOUT (= 15s, baseline default)"},
		{name: "bulkhead wait > call", env: map[string]string{"BULKHEAD_MAX_WAIT": "20s", "CALL_TIMEOUT": "16s"},
			wantVar: "BULKHEAD_MAX_WAIT", wantRule: "must be < CALL_TIMEOUT (= 16s, env)"},
		{name: "ca only without ca file", env: map[string]string{"TLS_CA_ONLY": "true"},
			wantVar: "TLS_CA_ONLY", exact: "PAYMENTS_TLS_CA_ONLY=true: needs TLS_CA_FILE: there is no CA bundle to trust alone"},
		{name: "cert without key", env: map[string]string{"TLS_CERT_FILE": cert},
			wantVar: "TLS_KEY_FILE", exact: "PAYMENTS_TLS_KEY_FILE (unset): set together with TLS_CERT_FILE (a client certificate needs both)"},
		{name: "key without cert", env: map[string]string{"TLS_KEY_FILE": key},
			wantVar: "TLS_CERT_FILE", exact: "PAYMENTS_TLS_CERT_FILE (unset): set together with TLS_KEY_FILE (a client certificate needs both)"},
		{name: "cert with http base url", env: map[string]string{"BASE_URL": "http://payments.internal", "TLS_CERT_FILE": cert, "TLS_KEY_FILE": key},
			wantVar: "TLS_CERT_FILE", exact: "PAYMENTS_TLS_CERT_FILE=" + cert + ": a client certificate needs an https BASE_URL"},
		{name: "cert with HTTP base url", env: map[string]string{"BASE_URL": "HTTP://payments.internal", "TLS_CERT_FILE": cert, "TLS_KEY_FILE": key},
			wantVar: "TLS_CERT_FILE", wantRule: "needs an https BASE_URL"},
	})
}

// TestCrossRulesSkipInvalidFields checks that a cross rule is not judged
// against a field that is itself invalid: one mistake, one problem, on the
// variable to change.
func TestCrossRulesSkipInvalidFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		env      map[string]string
		wantVars []string
	}{
		{"read too long: call not judged against it", map[string]string{"READ_TIMEOUT": "61s"}, []string{"READ_TIMEOUT"}},
		{"read unparsable: connect not judged against the baseline read",
			map[string]string{"CONNECT_TIMEOUT": "15s", "READ_TIMEOUT": "30", "CALL_TIMEOUT": "50s"}, []string{"READ_TIMEOUT"}},
		{"connect unparsable: call not judged", map[string]string{"CONNECT_TIMEOUT": "abc", "READ_TIMEOUT": "10s", "CALL_TIMEOUT": "11s"}, []string{"CONNECT_TIMEOUT"}},
		{"call unparsable: bulkhead not judged", map[string]string{"CALL_TIMEOUT": "x", "BULKHEAD_MAX_WAIT": "20s"}, []string{"CALL_TIMEOUT"}},
		{"backoff max unparsable", map[string]string{"BACKOFF_MAX": "2", "BACKOFF_BASE": "3s"}, []string{"BACKOFF_MAX"}},
		{"zero read: only read", map[string]string{"READ_TIMEOUT": "0"}, []string{"READ_TIMEOUT"}},
		{"zero call: only call", map[string]string{"CALL_TIMEOUT": "0", "BULKHEAD_MAX_WAIT": "1s"}, []string{"CALL_TIMEOUT"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, probs := loadPayments(t, config.Client{}, tc.env)
			var want []string
			for _, s := range tc.wantVars {
				want = append(want, "PAYMENTS_"+s)
			}
			if got := vars(probs); !slices.Equal(got, want) {
				t.Errorf("problems on %v, want %v:%s", got, want, dump(probs))
			}
		})
	}
}

func TestValidBoundaries(t *testing.T) {
	t.Parallel()
	cert, key := tlsFiles(t)
	cases := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c config.Client)
	}{
		{"baseline with a base url", nil, func(t *testing.T, c config.Client) {
			want := config.Baseline()
			want.BaseURL = goodURL
			if c != want {
				t.Errorf("got %+v\nwant %+v", c, want)
			}
		}},
		{"call exactly connect+read+1s", map[string]string{"CONNECT_TIMEOUT": "2s", "READ_TIMEOUT": "5s", "CALL_TIMEOUT": "8s"}, func(t *testing.T, c config.Client) {
			if c.CallTimeout != 8*time.Second || c.ConnectTimeout != 2*time.Second || c.ReadTimeout != 5*time.Second {
				t.Errorf("timeouts = %v/%v/%v, want 2s/5s/8s", c.ConnectTimeout, c.ReadTimeout, c.CallTimeout)
			}
		}},
		{"tls == read", map[string]string{"TLS_HANDSHAKE_TIMEOUT": "5s", "READ_TIMEOUT": "5s"}, func(t *testing.T, c config.Client) {
			if c.TLSHandshakeTimeout != c.ReadTimeout {
				t.Errorf("tls %v != read %v", c.TLSHandshakeTimeout, c.ReadTimeout)
			}
		}},
		{"read = 60s", map[string]string{"READ_TIMEOUT": "60s", "CALL_TIMEOUT": "63s"}, func(t *testing.T, c config.Client) {
			if c.ReadTimeout != time.Minute {
				t.Errorf("read = %v, want 1m", c.ReadTimeout)
			}
		}},
		{"read = 1m", map[string]string{"READ_TIMEOUT": "1m", "CALL_TIMEOUT": "1m3s"}, nil},
		{"connect just below read", map[string]string{"CONNECT_TIMEOUT": "4999ms", "READ_TIMEOUT": "5s", "CALL_TIMEOUT": "11s"}, nil},
		{"ratios 1", map[string]string{"RETRY_BUDGET_RATIO": "1", "BREAKER_FAILURE_RATIO": "1.0"}, func(t *testing.T, c config.Client) {
			if c.RetryBudgetRatio != 1 || c.BreakerFailureRatio != 1 {
				t.Errorf("ratios = %v, %v; want 1, 1", c.RetryBudgetRatio, c.BreakerFailureRatio)
			}
		}},
		{"ratios tiny", map[string]string{"RETRY_BUDGET_RATIO": "0.001", "BREAKER_FAILURE_RATIO": "1e-9"}, nil},
		{"int lows", map[string]string{"MAX_CONCURRENT": "1", "RETRIES": "0", "MAX_REDIRECTS": "0", "RETRY_BUDGET_MIN_PER_SEC": "0",
			"BREAKER_MIN_REQUESTS": "1", "BREAKER_HALF_OPEN_PROBES": "1"}, func(t *testing.T, c config.Client) {
			if c.MaxConcurrent != 1 || c.Retries != 0 || c.MaxRedirects != 0 || c.BreakerMinRequests != 1 {
				t.Errorf("got %+v", c)
			}
		}},
		{"int highs", map[string]string{"MAX_CONCURRENT": "10000", "RETRIES": "10", "MAX_REDIRECTS": "20", "RETRY_BUDGET_MIN_PER_SEC": "10000",
			"BREAKER_MIN_REQUESTS": "100000", "BREAKER_HALF_OPEN_PROBES": "1000"}, nil},
		{"int with spaces and sign", map[string]string{"MAX_CONCURRENT": " +7 "}, func(t *testing.T, c config.Client) {
			if c.MaxConcurrent != 7 {
				t.Errorf("MaxConcurrent = %d, want 7", c.MaxConcurrent)
			}
		}},
		{"breaker window bounds and idle max", map[string]string{"BREAKER_WINDOW": "1s", "BREAKER_OPEN_TIMEOUT": "1h", "IDLE_CONN_TIMEOUT": "10m"}, nil},
		{"breaker window 1h", map[string]string{"BREAKER_WINDOW": "1h"}, nil},
		{"bulkhead wait just below call", map[string]string{"BULKHEAD_MAX_WAIT": "14999ms"}, nil},
		{"backoff base == max", map[string]string{"BACKOFF_BASE": "2s", "BACKOFF_MAX": "2s"}, nil},
		{"redirect policies and tls", map[string]string{"FOLLOW_REDIRECTS": "none", "TLS_MIN_VERSION": "1.3", "TLS_SERVER_NAME": "payments.internal"}, func(t *testing.T, c config.Client) {
			if c.FollowRedirects != "none" || c.TLSMinVersion != "1.3" || c.TLSServerName != "payments.internal" {
				t.Errorf("got %+v", c)
			}
		}},
		{"redirects any", map[string]string{"FOLLOW_REDIRECTS": "any"}, nil},
		{"ca only with ca file", map[string]string{"TLS_CA_ONLY": "true", "TLS_CA_FILE": cert}, func(t *testing.T, c config.Client) {
			if !c.TLSCAOnly || c.TLSCAFile != cert {
				t.Errorf("got %+v", c)
			}
		}},
		{"ca only false", map[string]string{"TLS_CA_ONLY": "false"}, nil},
		{"mtls with https", map[string]string{"TLS_CERT_FILE": cert, "TLS_KEY_FILE": key}, func(t *testing.T, c config.Client) {
			if c.TLSCertFile != cert || c.TLSKeyFile != key {
				t.Errorf("got %+v", c)
			}
		}},
		{"plain http without cert", map[string]string{"BASE_URL": "http://payments.internal"}, nil},
		{"base url with query", map[string]string{"BASE_URL": "https://h:8443/v1?region=eu"}, nil},
		{"base url ipv6", map[string]string{"BASE_URL": "http://[::1]:8080"}, nil},
		{"durations with spaces", map[string]string{"READ_TIMEOUT": " 5s "}, func(t *testing.T, c config.Client) {
			if c.ReadTimeout != 5*time.Second {
				t.Errorf("read = %v", c.ReadTimeout)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, probs := loadPayments(t, config.Client{}, tc.env)
			if len(probs) != 0 {
				t.Fatalf("got %d problems, want none:%s", len(probs), dump(probs))
			}
			if tc.check != nil {
				tc.check(t, l.Client)
			}
		})
	}
}

// TestBadValueShapes: each value that does not parse is one problem; all
// of them together are one problem each in the same report.
func TestBadValueShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		suffix, value, wantRule string
	}{
		{"READ_TIMEOUT", "abc", "not a duration: use Go syntax with a unit"},
		{"READ_TIMEOUT", "10", "not a duration: a unit is missing"},
		{"READ_TIMEOUT", "1.5", "a unit is missing"},
		{"READ_TIMEOUT", "-1s", "must be > 0 (0 or less would mean no timeout"},
		{"READ_TIMEOUT", "", "not a duration"},
		{"CONNECT_TIMEOUT", "1 s", "not a duration"},
		{"CALL_TIMEOUT", "15sec", "not a duration"},
		{"RETRIES", "two", "not a whole number"},
		{"RETRIES", "1.5", "not a whole number"},
		{"RETRIES", "99999999999999999999", "not a whole number"},
		{"MAX_CONCURRENT", "", "not a whole number"},
		{"RETRY_BUDGET_RATIO", "NaN", "not a finite number"},
		{"RETRY_BUDGET_RATIO", "Inf", "not a finite number"},
		{"BREAKER_FAILURE_RATIO", "-Inf", "not a finite number"},
		{"BREAKER_FAILURE_RATIO", "abc", "not a finite number"},
		{"TLS_CA_ONLY", "maybe", "not a boolean (true or false)"},
		{"TLS_CA_ONLY", "", "not a boolean"},
	}
	for _, tc := range cases {
		t.Run(tc.suffix+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			_, probs := loadPayments(t, config.Client{}, map[string]string{tc.suffix: tc.value})
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:%s", len(probs), dump(probs))
			}
			p := probs[0]
			if p.Var != "PAYMENTS_"+tc.suffix || !strings.Contains(p.Rule, tc.wantRule) {
				t.Errorf("got %q, want PAYMENTS_%s with rule containing %q", p.Error(), tc.suffix, tc.wantRule)
			}
			if p.Value != tc.value || p.Source != config.FromEnv {
				t.Errorf("value, source = %q, %v; want %q, env", p.Value, p.Source, tc.value)
			}
		})
	}

	t.Run("all at once", func(t *testing.T) {

		t.Parallel()
		pay := map[string]string{
			"BASE_URL":              goodURL,
			"READ_TIMEOUT":          "abc",
			"CONNECT_TIMEOUT":       "10",
			"CALL_TIMEOUT":          "-1s",
			"TLS_HANDSHAKE_TIMEOUT": "",
			"RETRIES":               "two",
			"RETRY_BUDGET_RATIO":    "NaN",
			"BREAKER_FAILURE_RATIO": "Inf",
			"TLS_CA_ONLY":           "maybe",
		}
		inv := map[string]string{
			"BASE_URL":           "https://inventory.internal",
			"RETRIES":            "1.5",
			"RETRY_BUDGET_RATIO": "abc",
			"IDLE_CONN_TIMEOUT":  "forever",
		}
		lenv := prefixed("PAYMENTS", pay)
		maps.Copy(lenv, prefixed("INVENTORY", inv))
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments"}, config.System{Name: "inventory"})
		probs := problemsOf(t, err)
		if len(ls) != 2 {
			t.Errorf("loaded %d systems, want 2", len(ls))
		}
		want := len(pay) - 1 + len(inv) - 1
		if len(probs) != want {
			t.Errorf("got %d problems, want %d:%s", len(probs), want, dump(probs))
		}
		msg := err.Error()
		for k := range pay {
			if k != "BASE_URL" && !strings.Contains(msg, "\n  PAYMENTS_"+k+"=") {
				t.Errorf("report lacks PAYMENTS_%s:\n%s", k, msg)
			}
		}
		for k := range inv {
			if k != "BASE_URL" && !strings.Contains(msg, "\n  INVENTORY_"+k+"=") {
				t.Errorf("report lacks INVENTORY_%s:\n%s", k, msg)
			}
		}
	})
}

func TestAggregation(t *testing.T) {
	t.Parallel()
	lenv := map[string]string{
		// payments: 4 problems
		"PAYMENTS_BASE_URL":         "ftp://payments",
		"PAYMENTS_READ_TIMEOUT":     "0",
		"PAYMENTS_MAX_CONCURRENT":   "0",
		"PAYMENTS_FOLLOW_REDIRECTS": "sometimes",
		// inventory: 3 problems
		"INVENTORY_CONNECT_TIMEOUT": "abc",
		"INVENTORY_RETRIES":         "11",
		"INVENTORY_TLS_MIN_VERSION": "1.1",
		// declares shipping (no BASE_URL: 1 problem), one empty entry and
		// one bad name (2 problems)
		"OUTBOUND_SYSTEMS": "shipping,,Ledger",
	}
	ls, err := config.LoadEnv(lenv, config.System{Name: "payments"}, config.System{Name: "inventory", Defaults: config.Client{BaseURL: "https://inventory.internal"}})
	if err == nil {
		t.Fatal("Load returned no error")
	}
	probs := problemsOf(t, err)
	wantVars := []string{
		"OUTBOUND_SYSTEMS", "OUTBOUND_SYSTEMS",
		"PAYMENTS_BASE_URL", "PAYMENTS_READ_TIMEOUT", "PAYMENTS_MAX_CONCURRENT", "PAYMENTS_FOLLOW_REDIRECTS",
		"INVENTORY_CONNECT_TIMEOUT", "INVENTORY_RETRIES", "INVENTORY_TLS_MIN_VERSION",
		"SHIPPING_BASE_URL",
	}
	if got := vars(probs); !slices.Equal(got, wantVars) {
		t.Errorf("problems on\n\t%v\nwant\n\t%v%s", got, wantVars, dump(probs))
	}
	msg := err.Error()
	if first := fmt.Sprintf("outbound config: %d problems", len(wantVars)); !strings.HasPrefix(msg, first+"\n") {
		t.Errorf("report starts %q, want %q", strings.SplitN(msg, "\n", 2)[0], first)
	}
	if got := strings.Count(msg, "\n  "); got != len(wantVars) {
		t.Errorf("report has %d problem lines, want %d:\n%s", got, len(wantVars), msg)
	}
	for _, v := range wantVars {
		if !strings.Contains(msg, v) {
			t.Errorf("report lacks %s", v)
		}
	}
	if !strings.Contains(msg, "OUTBOUND_SYSTEMS=shipping,,Ledger: entry 2 is empty") {
		t.Errorf("report lacks the empty entry:\n%s", msg)
	}
	if !strings.Contains(msg, "OUTBOUND_SYSTEMS=Ledger: ") || !strings.Contains(msg, "system name must be lower case") {
		t.Errorf("report lacks the bad name:\n%s", msg)
	}
	// The systems that could be declared are still returned, in order.
	var names []string
	for _, l := range ls {
		names = append(names, l.Name)
	}
	if want := []string{"payments", "inventory", "shipping"}; !slices.Equal(names, want) {
		t.Errorf("loaded %v, want %v", names, want)
	}
	// Problems carry their system.
	for _, p := range probs {
		wantSys := ""
		switch {
		case strings.HasPrefix(p.Var, "PAYMENTS_"):
			wantSys = "payments"
		case strings.HasPrefix(p.Var, "INVENTORY_"):
			wantSys = "inventory"
		case strings.HasPrefix(p.Var, "SHIPPING_"):
			wantSys = "shipping"
		}
		if p.System != wantSys {
			t.Errorf("%s: system %q, want %q", p.Var, p.System, wantSys)
		}
	}
}

func TestErrorsAsIs(t *testing.T) {
	t.Parallel()
	lenv := map[string]string{
		"PAYMENTS_BASE_URL":     goodURL,
		"PAYMENTS_CALL_TIMEOUT": "3s",
		"PAYMENTS_READ_TIMEOUT": "5s",
	}
	ls, err := config.LoadEnv(lenv, config.System{Name: "payments"})
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("errors.Is(%v, ErrInvalid) = false", err)
	}
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("errors.As(*config.Error) failed on %T", err)
	}
	if len(ce.Problems) != 1 || ce.Problems[0].Var != "PAYMENTS_CALL_TIMEOUT" {
		t.Fatalf("problems = %v", vars(ce.Problems))
	}
	// Each problem is itself an error reachable through the tree.
	var p config.Problem
	if !errors.As(err, &p) || p.Var != "PAYMENTS_CALL_TIMEOUT" {
		t.Errorf("errors.As(Problem) = %v", p)
	}
	if want := "outbound config: 1 problem\n  PAYMENTS_CALL_TIMEOUT=3s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 8s; CONNECT_TIMEOUT = 2s, baseline default; READ_TIMEOUT = 5s, env)"; err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	// Load returns the system alongside the error, with the values it read.
	if len(ls) != 1 || ls[0].Name != "payments" || ls[0].Client.CallTimeout != 3*time.Second || ls[0].Client.BaseURL != goodURL {
		t.Errorf("loaded = %+v", ls)
	}
	if errors.Is(errors.New("other"), config.ErrInvalid) {
		t.Error("an unrelated error matches ErrInvalid")
	}
	if wrapped := fmt.Errorf("start: %w", err); !errors.Is(wrapped, config.ErrInvalid) || !errors.As(wrapped, &ce) {
		t.Error("a wrapped *config.Error is not found")
	}
}

func TestProblemRendering(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    config.Problem
		want string
	}{
		{config.Problem{Var: "P_READ_TIMEOUT", Value: "abc", Source: config.FromEnv, Rule: "r"}, "P_READ_TIMEOUT=abc: r"},
		{config.Problem{Var: "P_READ_TIMEOUT", Value: "", Source: config.FromEnv, Rule: "r"}, "P_READ_TIMEOUT=: r"},
		{config.Problem{Var: "P_CALL_TIMEOUT", Value: "15s", Source: config.FromBaseline, Rule: "r"}, "P_CALL_TIMEOUT=15s (baseline default): r"},
		{config.Problem{Var: "P_CALL_TIMEOUT", Value: "15s", Source: config.FromCode, Rule: "r"}, "P_CALL_TIMEOUT=15s (code default): r"},
		{config.Problem{Var: "P_BASE_URL", Source: config.FromBaseline, Rule: "r"}, "P_BASE_URL (unset): r"},
		{config.Problem{Var: "code", Value: "Bad", Source: config.FromCode, Rule: "r"}, "code=Bad: r"},
	}
	for _, tc := range cases {
		if got := tc.p.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	for s, want := range map[config.Source]string{config.FromBaseline: "baseline", config.FromCode: "code", config.FromEnv: "env"} {
		if s.String() != want {
			t.Errorf("Source(%d) = %q, want %q", s, s.String(), want)
		}
	}
}

func TestUnknownVariables(t *testing.T) {
	t.Parallel()
	t.Run("typo", func(t *testing.T) {
		t.Parallel()
		const secretValue = "typo-value-hunter2"
		lenv := map[string]string{
			"PAYMENTS_BASE_URL":       goodURL,
			"PAYMENTS_CONECT_TIMEOUT": secretValue,
		}
		_, err := config.LoadEnv(lenv, config.System{Name: "payments"})
		probs := problemsOf(t, err)
		if len(probs) != 1 {
			t.Fatalf("got %d problems, want 1:%s", len(probs), dump(probs))
		}
		p := probs[0]
		if p.Var != "PAYMENTS_CONECT_TIMEOUT" || p.System != "payments" {
			t.Errorf("problem on %s of %q", p.Var, p.System)
		}
		if !strings.Contains(p.Rule, "did you mean PAYMENTS_CONNECT_TIMEOUT") {
			t.Errorf("rule = %q, want a suggestion of PAYMENTS_CONNECT_TIMEOUT", p.Rule)
		}
		assertNoSecrets(t, "report", err.Error(), secretValue)
		assertNoSecrets(t, "problem value", p.Value, secretValue)
	})
	t.Run("far from any setting: not outbound's", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL, "PAYMENTS_WHATEVER_ELSE_ENTIRELY": "1"}
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments"})
		if err != nil {
			t.Fatalf("reported: %v", err)
		}
		if got := ls[0].Ignored(); !slices.Equal(got, []string{"PAYMENTS_WHATEVER_ELSE_ENTIRELY"}) {
			t.Errorf("Ignored() = %v", got)
		}
	})
	t.Run("kubernetes service links", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"PAYMENTS_BASE_URL": goodURL}
		for _, k := range []string{"PAYMENTS_SERVICE_HOST", "PAYMENTS_SERVICE_PORT", "PAYMENTS_SERVICE_PORT_HTTPS", "PAYMENTS_PORT",
			"PAYMENTS_PORT_443_TCP", "PAYMENTS_PORT_443_TCP_ADDR", "PAYMENTS_PORT_443_TCP_PORT", "PAYMENTS_PORT_443_TCP_PROTO", "PAYMENTS_PORT_53_UDP"} {
			env[k] = "10.0.0.1"
		}
		lenv := env
		if _, err := config.LoadEnv(lenv, config.System{Name: "payments"}); err != nil {
			t.Errorf("service-link variables reported: %v", err)
		}
	})
	t.Run("longest prefix wins", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{
			"PAYMENTS_BASE_URL":        goodURL,
			"PAYMENTS_EU_BASE_URL":     "https://payments.eu.internal",
			"PAYMENTS_EU_READ_TIMEOUT": "5s",
		}
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments"}, config.System{Name: "payments-eu"})
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if ls[1].Name != "payments-eu" || ls[1].Client.BaseURL != "https://payments.eu.internal" || ls[1].Client.ReadTimeout != 5*time.Second {
			t.Errorf("payments-eu = %+v", ls[1].Client)
		}
		if ls[0].Client.BaseURL != goodURL {
			t.Errorf("payments base = %q", ls[0].Client.BaseURL)
		}
	})
	t.Run("typo in the longer prefix belongs to it", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{
			"PAYMENTS_BASE_URL":        goodURL,
			"PAYMENTS_EU_BASE_URL":     "https://payments.eu.internal",
			"PAYMENTS_EU_RETRYS":       "3",
			"PAYMENTS_EU_SERVICE_HOST": "10.0.0.2",
		}
		_, err := config.LoadEnv(lenv, config.System{Name: "payments"}, config.System{Name: "payments-eu"})
		probs := problemsOf(t, err)
		if len(probs) != 1 || probs[0].System != "payments-eu" || !strings.Contains(probs[0].Rule, "did you mean PAYMENTS_EU_RETRIES?") {
			t.Errorf("got:%s", dump(probs))
		}
	})
	t.Run("only payments declared: PAYMENTS_EU_ is not its typo", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL, "PAYMENTS_EU_BASE_URL": "https://x"}
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments"})
		if err != nil || !slices.Equal(ls[0].Ignored(), []string{"PAYMENTS_EU_BASE_URL"}) {
			t.Errorf("err %v, ignored %v", err, ls[0].Ignored())
		}
	})
	t.Run("undeclared system ignored", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{
			"PAYMENTS_BASE_URL":        goodURL,
			"SHIPPING_BASE_URL":        "ftp://nonsense",
			"SHIPPING_CONECT_TIMEOUT":  "x",
			"LEDGER_READ_TIMEOUT":      "abc",
			"OUTBOUND_SOMETHING_ELSE":  "1",
			"PAYMENTSX_CONNECT_TIMOUT": "1",
		}
		if _, err := config.LoadEnv(lenv, config.System{Name: "payments"}); err != nil {
			t.Errorf("variables of undeclared systems reported: %v", err)
		}
	})
	t.Run("unknown variables sorted", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{
			"PAYMENTS_BASE_URL":      goodURL,
			"PAYMENTS_RETRYS":        "1",
			"PAYMENTS_BACKOF_MAX":    "1s",
			"PAYMENTS_MAX_CONCURENT": "1",
		}
		_, err := config.LoadEnv(lenv, config.System{Name: "payments"})
		if got, want := vars(problemsOf(t, err)), []string{"PAYMENTS_BACKOF_MAX", "PAYMENTS_MAX_CONCURENT", "PAYMENTS_RETRYS"}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("no unprefixed fallback", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL, "READ_TIMEOUT": "abc", "BASE_URL": "ftp://x"}
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments"})
		if err != nil || ls[0].Client.ReadTimeout != config.Baseline().ReadTimeout {
			t.Errorf("unprefixed variables were read: %v %+v", err, ls)
		}
	})
}

func TestSystemNames(t *testing.T) {
	t.Parallel()
	long := "a" + strings.Repeat("b", 63)
	cases := []struct {
		name, wantRule string
	}{
		{"", "system name is empty"},
		{"Payments", "must be lower case letters"},
		{"1abc", "starting with a letter"},
		{"a b", "must be lower case letters"},
		{"-x", "must be lower case letters"},
		{"x-", "must be lower case letters"},
		{"a--b", "must be lower case letters"},
		{"pay.ments", "must be lower case letters"},
		{long, "longer than 63 bytes"},
		{"outbound", `"outbound" is reserved`},
	}
	for _, tc := range cases {
		t.Run("code/"+tc.name, func(t *testing.T) {
			t.Parallel()
			lenv := map[string]string{"INVENTORY_BASE_URL": "https://inventory.internal"}
			ls, err := config.LoadEnv(lenv, config.System{Name: tc.name}, config.System{Name: "inventory"})
			probs := problemsOf(t, err)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:%s", len(probs), dump(probs))
			}
			p := probs[0]
			if p.Var != "code" || p.Value != tc.name || p.System != "" || !strings.Contains(p.Rule, tc.wantRule) {
				t.Errorf("got %+v, want Var code, Value %q, rule containing %q", p, tc.name, tc.wantRule)
			}
			if len(ls) != 1 || ls[0].Name != "inventory" {
				t.Errorf("loaded %+v, want inventory only", ls)
			}
		})
		if tc.name == "" || strings.ContainsAny(tc.name, " ") {
			continue // not expressible as one OUTBOUND_SYSTEMS entry
		}
		t.Run("env/"+tc.name, func(t *testing.T) {
			t.Parallel()
			lenv := map[string]string{"OUTBOUND_SYSTEMS": tc.name}
			_, err := config.LoadEnv(lenv)
			probs := problemsOf(t, err)
			if len(probs) != 1 || probs[0].Var != "OUTBOUND_SYSTEMS" || probs[0].Source != config.FromEnv || !strings.Contains(probs[0].Rule, tc.wantRule) {
				t.Errorf("got:%s", dump(probs))
			}
		})
	}

	t.Run("63 bytes accepted", func(t *testing.T) {

		t.Parallel()
		name := long[:63]
		lenv := map[string]string{config.Prefix(name) + "_BASE_URL": goodURL}
		if _, err := config.LoadEnv(lenv, config.System{Name: name}); err != nil {
			t.Errorf("Load(%q): %v", name, err)
		}
	})
	t.Run("prefix", func(t *testing.T) {
		t.Parallel()
		for name, want := range map[string]string{"order-history": "ORDER_HISTORY", "order_history": "ORDER_HISTORY", "payments": "PAYMENTS", "s3": "S3"} {
			if got := config.Prefix(name); got != want {
				t.Errorf("Prefix(%q) = %q, want %q", name, got, want)
			}
		}
		lenv := map[string]string{"ORDER_HISTORY_BASE_URL": "https://oh.internal", "ORDER_HISTORY_RETRIES": "4"}
		ls, err := config.LoadEnv(lenv, config.System{Name: "order-history"})
		if err != nil {
			t.Fatal(err)
		}
		if l := ls[0]; l.Prefix != "ORDER_HISTORY" || l.Client.BaseURL != "https://oh.internal" || l.Client.Retries != 4 || l.SourceOf("RETRIES") != config.FromEnv {
			t.Errorf("got %+v", l)
		}
	})
	t.Run("duplicate in code", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL}
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments"}, config.System{Name: "payments"})
		probs := problemsOf(t, err)
		if len(probs) != 1 || probs[0].Var != "code" || probs[0].Rule != `system "payments" is declared twice` {
			t.Errorf("got:%s", dump(probs))
		}
		if len(ls) != 1 {
			t.Errorf("loaded %d systems, want 1", len(ls))
		}
	})
	t.Run("duplicate in OUTBOUND_SYSTEMS", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL, "OUTBOUND_SYSTEMS": "payments,payments"}
		ls, err := config.LoadEnv(lenv)
		probs := problemsOf(t, err)
		if len(probs) != 1 || probs[0].Var != "OUTBOUND_SYSTEMS" || probs[0].Rule != `system "payments" is listed twice` {
			t.Errorf("got:%s", dump(probs))
		}
		if len(ls) != 1 {
			t.Errorf("loaded %d systems, want 1", len(ls))
		}
	})
	t.Run("prefix collision", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"ORDER_HISTORY_BASE_URL": goodURL, "OUTBOUND_SYSTEMS": "order_history"}
		ls, err := config.LoadEnv(lenv, config.System{Name: "order-history"})
		probs := problemsOf(t, err)
		want := `systems "order-history" and "order_history" share the variable prefix ORDER_HISTORY_`
		if len(probs) != 1 || probs[0].Var != "OUTBOUND_SYSTEMS" || probs[0].Rule != want {
			t.Errorf("got:%s\nwant rule %s", dump(probs), want)
		}
		if len(ls) != 1 || ls[0].Name != "order-history" {
			t.Errorf("loaded %+v", ls)
		}
	})
	t.Run("prefix collision in code", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"ORDER_HISTORY_BASE_URL": goodURL}
		_, err := config.LoadEnv(lenv, config.System{Name: "order_history"}, config.System{Name: "order-history"})
		probs := problemsOf(t, err)
		if len(probs) != 1 || probs[0].Var != "code" || !strings.Contains(probs[0].Rule, "share the variable prefix ORDER_HISTORY_") {
			t.Errorf("got:%s", dump(probs))
		}
	})
	for _, tc := range []struct{ list, want string }{
		{"payments,,inventory", "entry 2 is empty"},
		{"payments,inventory,", "entry 3 is empty"},
		{",payments,inventory", "entry 1 is empty"},
		{"payments, ,inventory", "entry 2 is empty"},
	} {
		t.Run("empty entry "+tc.list, func(t *testing.T) {
			t.Parallel()
			lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL, "INVENTORY_BASE_URL": goodURL, "OUTBOUND_SYSTEMS": tc.list}
			ls, err := config.LoadEnv(lenv)
			probs := problemsOf(t, err)
			if len(probs) != 1 || probs[0].Var != "OUTBOUND_SYSTEMS" || probs[0].Value != tc.list || !strings.HasPrefix(probs[0].Rule, tc.want) {
				t.Errorf("got:%s\nwant %q", dump(probs), tc.want)
			}
			if len(ls) != 2 {
				t.Errorf("loaded %d systems, want 2", len(ls))
			}
		})
	}
	t.Run("whitespace around names", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL, "INVENTORY_BASE_URL": goodURL, "OUTBOUND_SYSTEMS": " payments ,\tinventory "}
		ls, err := config.LoadEnv(lenv)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 2 || ls[0].Name != "payments" || ls[1].Name != "inventory" {
			t.Errorf("loaded %+v", ls)
		}
	})
	t.Run("in code and in OUTBOUND_SYSTEMS", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{
			"PAYMENTS_BASE_URL":  goodURL,
			"INVENTORY_BASE_URL": "https://inventory.internal",
			"OUTBOUND_SYSTEMS":   "inventory,payments",
		}
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments", Defaults: config.Client{ConnectTimeout: 500 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range ls {
			names = append(names, l.Name)
		}
		if want := []string{"payments", "inventory"}; !slices.Equal(names, want) {
			t.Fatalf("loaded %v, want %v (code first, each once)", names, want)
		}
		if c := ls[0].Client.ConnectTimeout; c != 500*time.Millisecond || ls[0].SourceOf("CONNECT_TIMEOUT") != config.FromCode {
			t.Errorf("payments connect = %v from %v, want 500ms from code", c, ls[0].SourceOf("CONNECT_TIMEOUT"))
		}
	})
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	t.Run("baseline < code < env", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{
			"PAYMENTS_BASE_URL":     goodURL,
			"PAYMENTS_READ_TIMEOUT": "25s",
			"PAYMENTS_RETRIES":      "0", // env 0 is 0, not "take the default"
		}
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments", Defaults: config.Client{
			ConnectTimeout: time.Second,
			ReadTimeout:    20 * time.Second,
			CallTimeout:    40 * time.Second,
			Retries:        5,
		}})
		if err != nil {
			t.Fatal(err)
		}
		l := ls[0]
		cases := []struct {
			suffix string
			got    any
			want   any
			src    config.Source
		}{
			{"BASE_URL", l.Client.BaseURL, goodURL, config.FromEnv},
			{"CONNECT_TIMEOUT", l.Client.ConnectTimeout, time.Second, config.FromCode},
			{"READ_TIMEOUT", l.Client.ReadTimeout, 25 * time.Second, config.FromEnv},
			{"CALL_TIMEOUT", l.Client.CallTimeout, 40 * time.Second, config.FromCode},
			{"RETRIES", l.Client.Retries, 0, config.FromEnv},
			{"TLS_HANDSHAKE_TIMEOUT", l.Client.TLSHandshakeTimeout, 3 * time.Second, config.FromBaseline},
			{"MAX_CONCURRENT", l.Client.MaxConcurrent, 32, config.FromBaseline},
		}
		for _, tc := range cases {
			if tc.got != tc.want {
				t.Errorf("%s = %v, want %v", tc.suffix, tc.got, tc.want)
			}
			if got := l.SourceOf(tc.suffix); got != tc.src {
				t.Errorf("SourceOf(%s) = %v, want %v", tc.suffix, got, tc.src)
			}
		}
		if got := l.SourceOf("NO_SUCH_SETTING"); got != config.FromBaseline {
			t.Errorf("SourceOf(unknown) = %v", got)
		}
		if got := (config.Loaded{}).SourceOf("READ_TIMEOUT"); got != config.FromBaseline {
			t.Errorf("zero Loaded SourceOf = %v", got)
		}
	})
	t.Run("defaults from Baseline: zero means zero", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL}
		d := config.Baseline()
		d.Retries, d.MaxRedirects = 0, 0
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments", Defaults: d})
		if err != nil {
			t.Fatal(err)
		}
		if c := ls[0].Client; c.Retries != 0 || c.MaxRedirects != 0 {
			t.Errorf("retries, redirects = %d, %d; want 0, 0", c.Retries, c.MaxRedirects)
		}
		if ls[0].SourceOf("RETRIES") != config.FromCode {
			t.Errorf("SourceOf(RETRIES) = %v, want code", ls[0].SourceOf("RETRIES"))
		}
		if ls[0].SourceOf("CONNECT_TIMEOUT") != config.FromBaseline {
			t.Errorf("SourceOf(CONNECT_TIMEOUT) = %v, want baseline (not changed from it)", ls[0].SourceOf("CONNECT_TIMEOUT"))
		}
	})
	t.Run("zero defaults take the baseline", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL}
		ls, err := config.LoadEnv(lenv, config.System{Name: "payments", Defaults: config.Client{Retries: 0, MaxConcurrent: 0}})
		if err != nil {
			t.Fatal(err)
		}
		want := config.Baseline()
		want.BaseURL = goodURL
		if ls[0].Client != want {
			t.Errorf("got %+v\nwant %+v", ls[0].Client, want)
		}
		for _, v := range ls[0].Vars() {
			wantSrc := "baseline"
			if v.Name == "PAYMENTS_BASE_URL" {
				wantSrc = "env"
			}
			if v.Source != wantSrc {
				t.Errorf("%s source %q, want %q", v.Name, v.Source, wantSrc)
			}
		}
	})
	t.Run("bad code default is reported as such", func(t *testing.T) {
		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL}
		_, err := config.LoadEnv(lenv, config.System{Name: "payments", Defaults: config.Client{ReadTimeout: 2 * time.Minute, CallTimeout: 3 * time.Minute}})
		probs := problemsOf(t, err)
		if len(probs) != 1 || probs[0].Error() != "PAYMENTS_READ_TIMEOUT=2m (code default): "+
			"must be <= 60s: a synchronous call should not wait longer for its response; make the call asynchronous (202 Accepted + polling)" {
			t.Errorf("got:%s", dump(probs))
		}
	})
	t.Run("base url from code", func(t *testing.T) {
		t.Parallel()
		ls, err := config.Load(config.System{Name: "payments", Defaults: config.Client{BaseURL: "https://from-code"}})
		if err != nil || ls[0].Client.BaseURL != "https://from-code" || ls[0].SourceOf("BASE_URL") != config.FromCode {
			t.Errorf("got %+v, %v", ls, err)
		}
	})
}

func TestReference(t *testing.T) {
	t.Parallel()
	systems := []config.System{
		{Name: "payments", Defaults: func() config.Client {
			d := config.Baseline()
			d.ConnectTimeout, d.Retries, d.BaseURL = 5*time.Second, 0, "https://u:s3cret@p/"
			return d
		}()},
		{Name: "inventory"},
		{Name: "Bad Name"}, // skipped
	}
	refs := config.Reference(systems...)
	ct := reflect.TypeFor[config.Client]()
	if want := 2 * exportedFields(); len(refs) != want {
		t.Fatalf("Reference has %d vars, want %d", len(refs), want)
	}
	seen := map[string]int{}
	for _, v := range refs {
		seen[v.Name]++
		if v.Description == "" || v.Rule == "" || v.Type == "" || v.Setting == "" {
			t.Errorf("%s: empty documentation: %+v", v.Name, v)
		}
		if _, ok := ct.FieldByName(v.Setting); !ok {
			t.Errorf("%s: setting %q is no field of Client", v.Name, v.Setting)
		}
		if !strings.HasPrefix(v.Name, config.Prefix(v.System)+"_") {
			t.Errorf("%s: not under the prefix of %s", v.Name, v.System)
		}
		if v.Value != "" || v.Source != "" {
			t.Errorf("%s: Reference sets Value/Source: %+v", v.Name, v)
		}
	}
	// Every field of Client is one variable per system, named by envconfig.
	perSetting := map[string]int{}
	for _, v := range refs {
		perSetting[config.Prefix(v.System)+" "+v.Setting]++
	}
	for _, sys := range []string{"PAYMENTS", "INVENTORY"} {
		for i := range ct.NumField() {
			if !ct.Field(i).IsExported() {
				continue
			}
			if n := perSetting[sys+" "+ct.Field(i).Name]; n != 1 {
				t.Errorf("%s %s has %d variables, want 1", sys, ct.Field(i).Name, n)
			}
		}
	}
	byName := map[string]config.Var{}
	for _, v := range refs {
		byName[v.Name] = v
	}
	checks := []struct{ name, def, typ string }{
		{"PAYMENTS_CONNECT_TIMEOUT", "5s", "duration"},
		{"INVENTORY_CONNECT_TIMEOUT", "2s", "duration"},
		{"PAYMENTS_RETRIES", "0", "int"},
		{"INVENTORY_RETRIES", "2", "int"},
		{"PAYMENTS_BASE_URL", "https://REDACTED@p/", "url"},
		{"INVENTORY_BASE_URL", "", "url"},
		{"INVENTORY_RETRY_BUDGET_RATIO", "0.2", "float"},
		{"INVENTORY_TLS_CA_ONLY", "false", "bool"},
		{"INVENTORY_FOLLOW_REDIRECTS", "same-host", "string"},
		{"INVENTORY_BULKHEAD_MAX_WAIT", "0", "duration"},
		{"INVENTORY_IDLE_CONN_TIMEOUT", "1m30s", "duration"},
		{"INVENTORY_BACKOFF_BASE", "100ms", "duration"},
	}
	for _, c := range checks {
		v := byName[c.name]
		if v.Default != c.def || v.Type != c.typ {
			t.Errorf("%s: default %q type %q, want %q %q", c.name, v.Default, v.Type, c.def, c.typ)
		}
	}
	if !byName["PAYMENTS_BASE_URL"].Secret || byName["PAYMENTS_READ_TIMEOUT"].Secret {
		t.Error("only BASE_URL is secret")
	}
}

func TestVars(t *testing.T) {
	t.Parallel()
	lenv := map[string]string{"PAYMENTS_BASE_URL": goodURL, "PAYMENTS_READ_TIMEOUT": "20s", "PAYMENTS_CALL_TIMEOUT": "30s"}
	ls, err := config.LoadEnv(lenv, config.System{Name: "payments", Defaults: config.Client{ConnectTimeout: 5 * time.Second, ReadTimeout: 12 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	vs := ls[0].Vars()
	if len(vs) != exportedFields() {
		t.Fatalf("Vars has %d entries", len(vs))
	}
	by := map[string]config.Var{}
	for _, v := range vs {
		by[v.Name] = v
	}
	checks := []struct{ name, value, def, source string }{
		{"PAYMENTS_BASE_URL", goodURL, "", "env"},
		{"PAYMENTS_CONNECT_TIMEOUT", "5s", "5s", "code"},
		{"PAYMENTS_READ_TIMEOUT", "20s", "12s", "env"},
		{"PAYMENTS_CALL_TIMEOUT", "30s", "15s", "env"},
		{"PAYMENTS_TLS_HANDSHAKE_TIMEOUT", "3s", "3s", "baseline"},
	}
	for _, c := range checks {
		v := by[c.name]
		if v.Value != c.value || v.Default != c.def || v.Source != c.source {
			t.Errorf("%s: value %q default %q source %q; want %q %q %q", c.name, v.Value, v.Default, v.Source, c.value, c.def, c.source)
		}
	}
	want := "payments base=" + goodURL + " connect=5s tls=3s read=20s call=30s max_concurrent=32 bulkhead_wait=0 retries=2 backoff=100ms..2s breaker=0.5/20 in 30s open 15s redirects=same-host"
	if got := ls[0].Summary(); got != want {
		t.Errorf("Summary()\n got %q\nwant %q", got, want)
	}
}

// exportedFields counts the settings of config.Client.
func exportedFields() int {
	n := 0
	for f := range reflect.TypeFor[config.Client]().Fields() {
		if f.IsExported() {
			n++
		}
	}
	return n
}

// TestCrossRuleIsReportedOnTheVariableSet: READ_TIMEOUT=1ns is reported on
// READ_TIMEOUT, not on a CONNECT_TIMEOUT left at its baseline; the problem
// shows the other side of the rule with its value and source.
func TestCrossRuleIsReportedOnTheVariableSet(t *testing.T) {
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
