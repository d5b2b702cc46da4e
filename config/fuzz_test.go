package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
)

// fuzzSecret is put in the userinfo of PAYMENTS_BASE_URL on every run; it
// must never come out of a report, a Summary or Vars.
const fuzzSecret = "Zq9s3cr3tMarker"

// fuzzKeyOK says whether the fuzz target may set the variable k: a safe
// shape, not one the process already has (PATH, HOME, ...), and nothing
// the Go runtime reads while running (GODEBUG, ...).
func fuzzKeyOK(k string) bool {
	if k == "" || strings.ContainsAny(k, "=\x00") || strings.HasPrefix(strings.ToUpper(k), "GO") {
		return false
	}
	switch k {
	case "TZ", "TMPDIR", "HOME", "PATH":
		return false
	}
	_, set := os.LookupEnv(k)
	return !set
}

// FuzzLoad loads one or two code systems from an arbitrary environment:
// env is KEY=VALUE lines, systems the value of OUTBOUND_SYSTEMS (unset if
// empty), and PAYMENTS_BASE_URL is https://u:<fuzzSecret><pass>@<host>.
func FuzzLoad(f *testing.F) {
	f.Add("PAYMENTS_CONNECT_TIMEOUT=1s\nPAYMENTS_READ_TIMEOUT=5s\nPAYMENTS_CALL_TIMEOUT=7s", "", "pw", "payments.internal/v1", false)
	f.Add("PAYMENTS_CONECT_TIMEOUT=1s\nINVENTORY_RETRYS=3\nPAYMENTS_SERVICE_PORT_HTTPS=443", "inventory", "", "h", true)
	f.Add("PAYMENTS_READ_TIMEOUT=10\nPAYMENTS_CALL_TIMEOUT=-1s\nPAYMENTS_BREAKER_WINDOW=abc\nINVENTORY_BACKOFF_BASE=", "", "x", "h/?token=t#f", true)
	f.Add("SHIPPING_BASE_URL=ftp://x\nORDER_HISTORY_BASE_URL=https://oh", "payments,,shipping, order-history ,order_history,Bad,outbound", "", "h", false)
	f.Add("PAYMENTS_MAX_CONCURRENT=99999999999999999999\nPAYMENTS_RETRY_BUDGET_RATIO=1e309\nPAYMENTS_RETRIES=-9223372036854775808\nPAYMENTS_READ_TIMEOUT=9999999999999h", "", "", "h", false)
	f.Add("PAYMENTS_RETRY_BUDGET_RATIO=NaN\nPAYMENTS_TLS_CA_ONLY=maybe\nPAYMENTS_TLS_CERT_FILE=c\nPAYMENTS_=x\nPAYMENTS__=y", "inventory,inventory", ":p/ss#w?d", "[::1", true)
	f.Add("INVENTORY_BASE_URL=user:pass@host\nPAYMENTS_EU_BASE_URL=https://eu\nPAYMENTS_EU_X=1", "payments-eu", "%zz", "h:port", false)
	f.Add("OUTBOUND_SYSTEMS=a\n=\n==\nPAYMENTS_BASE_URL=http://other", ",", "@", "@@h", true)

	f.Fuzz(func(t *testing.T, env, systems, pass, host string, two bool) {
		// Keep each run small and fast: a real environment is a few KB.
		// (Every bad OUTBOUND_SYSTEMS entry repeats the whole list in its
		// problem, so a huge list makes a huge report.)
		if len(env) > 8<<10 || len(systems) > 1<<10 || len(pass)+len(host) > 1<<10 {
			t.Skip("input too large")
		}
		// The secret may only be where the harness puts it.
		strip := func(s string) string { return strings.ReplaceAll(s, fuzzSecret, "") }
		env, systems = strip(env), strip(systems)
		pass = strings.ReplaceAll(strip(pass), "\x00", "")
		host = strings.ReplaceAll(strip(host), "\x00", "")

		ours := map[string]bool{}
		defer func() {
			for k := range ours {
				os.Unsetenv(k)
			}
		}()
		set := func(k, v string) {
			if !ours[k] && !fuzzKeyOK(k) {
				return
			}
			if os.Setenv(k, v) == nil {
				ours[k] = true
			}
		}
		for i, line := range strings.Split(env, "\n") {
			if i == 64 {
				break
			}
			if k, v, ok := strings.Cut(line, "="); ok {
				set(k, v)
			}
		}
		if systems != "" {
			set(config.SystemsVar, systems)
		} else if ours[config.SystemsVar] {
			os.Unsetenv(config.SystemsVar)
		}
		set("PAYMENTS_BASE_URL", "https://u:"+fuzzSecret+pass+"@"+host)

		code := []config.System{{Name: "payments"}}
		if two {
			code = append(code, config.System{Name: "inventory", Defaults: inventoryDefaults()})
		}
		ls, err := config.Load(code...)

		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *config.Error: %v", err, err)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false")
			}
			if len(ce.Problems) == 0 {
				t.Fatalf("*config.Error with no problems")
			}
			for _, p := range ce.Problems {
				if p.Var == "" || p.Rule == "" {
					t.Errorf("problem with empty Var or Rule: %+v", p)
				}
			}
			if msg := err.Error(); strings.Contains(msg, fuzzSecret) {
				t.Fatalf("report leaks the secret:\n%s", msg)
			}
		}
		seen := map[string]bool{}
		for _, l := range ls {
			if seen[l.Name] {
				t.Errorf("system %q loaded twice", l.Name)
			}
			seen[l.Name] = true
			if s := l.Summary(); strings.Contains(s, fuzzSecret) {
				t.Fatalf("Summary leaks the secret: %s", s)
			}
			for _, v := range l.Vars() {
				if strings.Contains(v.Value, fuzzSecret) || strings.Contains(v.Default, fuzzSecret) {
					t.Fatalf("Vars leaks the secret: %+v", v)
				}
			}
		}
		if !seen["payments"] {
			t.Errorf("payments not loaded (err: %v)", err)
		}
		if two && !seen["inventory"] {
			t.Errorf("inventory not loaded (err: %v)", err)
		}
	})
}

// inventoryDefaults starts from the baseline: no retries, a 1s connect.
func inventoryDefaults() config.Client {
	d := config.Baseline()
	d.ConnectTimeout, d.Retries = time.Second, 0
	return d
}
