package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
)

// fleetRedis is a valid fleet Redis for the rate tests that need one.
var fleetRedis = map[string]string{config.FleetRedisURLVar: "redis://127.0.0.1:6379", config.FleetNamespaceVar: "checkout"}

// TestRateRules: each bad rate-limit setting is one problem of the
// startup report, on its own variable, with the rule it breaks.
func TestRateRules(t *testing.T) {
	t.Parallel()
	const spelling = "must be 0 (off) or a rate N/s, N/m or N/h: "
	runRuleCases(t, []ruleCase{
		{name: "limit without period", env: map[string]string{"RATE_LIMIT": "100"}, wantVar: "RATE_LIMIT",
			exact: "PAYMENTS_RATE_LIMIT=100: " + spelling + "the period is missing: write 100/s, 100/m or 100/h"},
		{name: "limit period word", env: map[string]string{"RATE_LIMIT": "100/sec"}, wantVar: "RATE_LIMIT",
			exact: "PAYMENTS_RATE_LIMIT=100/sec: " + spelling + `the period is s, m or h (100/s, 6000/m, 1000/h), not "sec"`},
		{name: "limit per day", env: map[string]string{"RATE_LIMIT": "100/d"}, wantVar: "RATE_LIMIT", wantRule: "the period is s, m or h"},
		{name: "limit 0/s", env: map[string]string{"RATE_LIMIT": "0/s"}, wantVar: "RATE_LIMIT", wantRule: "0/s allows nothing: write 0 to turn the limit off"},
		{name: "limit negative", env: map[string]string{"RATE_LIMIT": "-5/s"}, wantVar: "RATE_LIMIT", wantRule: "a whole number of requests per period"},
		{name: "limit fraction", env: map[string]string{"RATE_LIMIT": "1.5/s"}, wantVar: "RATE_LIMIT", wantRule: "a whole number of requests per period"},
		{name: "limit plus sign", env: map[string]string{"RATE_LIMIT": "+5/s"}, wantVar: "RATE_LIMIT", wantRule: "a whole number of requests per period"},
		{name: "limit NaN", env: map[string]string{"RATE_LIMIT": "NaN/s"}, wantVar: "RATE_LIMIT", wantRule: "a whole number of requests per period"},
		{name: "limit spaced", env: map[string]string{"RATE_LIMIT": "100 / s"}, wantVar: "RATE_LIMIT", wantRule: "a whole number of requests per period"},
		{name: "limit empty", env: map[string]string{"RATE_LIMIT": ""}, wantVar: "RATE_LIMIT", wantRule: spelling},
		{name: "limit word", env: map[string]string{"RATE_LIMIT": "off"}, wantVar: "RATE_LIMIT", wantRule: spelling},
		{name: "limit too large", env: map[string]string{"RATE_LIMIT": "1000000001/s"}, wantVar: "RATE_LIMIT", wantRule: "N is at most 1000000000"},
		{name: "limit overflows", env: map[string]string{"RATE_LIMIT": "99999999999999999999999/s"}, wantVar: "RATE_LIMIT", wantRule: "N is at most 1000000000"},
		{name: "burst negative", env: map[string]string{"RATE_LIMIT": "100/s", "RATE_BURST": "-1"}, wantVar: "RATE_BURST",
			exact: "PAYMENTS_RATE_BURST=-1: must be between 0 and 100000"},
		{name: "burst too large", env: map[string]string{"RATE_LIMIT": "100/s", "RATE_BURST": "100001"}, wantVar: "RATE_BURST", wantRule: "must be between 0 and 100000"},
		{name: "burst not a number", env: map[string]string{"RATE_LIMIT": "100/s", "RATE_BURST": "ten"}, wantVar: "RATE_BURST", wantRule: "not a whole number"},
		{name: "burst without limit", env: map[string]string{"RATE_BURST": "10"}, wantVar: "RATE_BURST",
			exact: "PAYMENTS_RATE_BURST=10: needs a rate limit: RATE_LIMIT (= 0, baseline default) is off"},
		{name: "burst with limit off in env", env: map[string]string{"RATE_BURST": "10", "RATE_LIMIT": "0"}, wantVar: "RATE_BURST",
			exact: "PAYMENTS_RATE_BURST=10: needs a rate limit: RATE_LIMIT (= 0, env) is off"},
		{name: "scope unknown", env: map[string]string{"RATE_LIMIT": "100/s", "RATE_SCOPE": "global"}, wantVar: "RATE_SCOPE",
			exact: "PAYMENTS_RATE_SCOPE=global: must be one of: local, fleet"},
		{name: "scope fleet without redis", env: map[string]string{"RATE_LIMIT": "100/s", "RATE_SCOPE": "fleet"}, wantVar: "RATE_SCOPE",
			exact: "PAYMENTS_RATE_SCOPE=fleet: scope fleet needs OUTBOUND_FLEET_REDIS_URL (the fleet's Redis): set it, or use local"},
		{name: "wait negative", env: map[string]string{"RATE_LIMIT": "100/s", "RATE_MAX_WAIT": "-1ms"}, wantVar: "RATE_MAX_WAIT",
			exact: "PAYMENTS_RATE_MAX_WAIT=-1ms: must be >= 0"},
		{name: "wait at call timeout", env: map[string]string{"RATE_LIMIT": "100/s", "RATE_MAX_WAIT": "15s"}, wantVar: "RATE_MAX_WAIT",
			exact: "PAYMENTS_RATE_MAX_WAIT=15s: must be < CALL_TIMEOUT (= 15s, baseline default)"},
		{name: "wait without unit", env: map[string]string{"RATE_LIMIT": "100/s", "RATE_MAX_WAIT": "50"}, wantVar: "RATE_MAX_WAIT", wantRule: "a unit is missing"},
		{name: "bad limit: burst not judged against it", env: map[string]string{"RATE_LIMIT": "lots", "RATE_BURST": "10"}, wantVar: "RATE_LIMIT", wantRule: spelling},
	})
}

// TestRateScopeFleetNeedsALimit: RATE_SCOPE=fleet shares a quota; without
// a RATE_LIMIT there is none to share, and it is a problem even with the
// fleet's Redis set.
func TestRateScopeFleetNeedsALimit(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PAYMENTS_BASE_URL": goodURL, "PAYMENTS_RATE_SCOPE": "fleet"}
	for k, v := range fleetRedis {
		env[k] = v
	}
	_, err := config.LoadEnv(env, config.System{Name: "payments"})
	probs := problemsOf(t, err)
	want := "PAYMENTS_RATE_SCOPE=fleet: needs a rate limit: RATE_LIMIT (= 0, baseline default) is off"
	if len(probs) != 1 || probs[0].Error() != want {
		t.Errorf("got:%s\nwant:\n\t%s", dump(probs), want)
	}
	// Neither a limit nor a Redis: a field shows the first rule it breaks
	// (validator stops there), the Redis; the limit comes next.
	_, err = config.LoadEnv(map[string]string{"PAYMENTS_BASE_URL": goodURL, "PAYMENTS_RATE_SCOPE": "fleet"}, config.System{Name: "payments"})
	if probs := problemsOf(t, err); len(probs) != 1 || probs[0].Var != "PAYMENTS_RATE_SCOPE" || !strings.Contains(probs[0].Rule, "needs OUTBOUND_FLEET_REDIS_URL") {
		t.Errorf("fleet without limit nor Redis:%s\nwant one problem on PAYMENTS_RATE_SCOPE, about the Redis", dump(probs))
	}
}

// TestRateProblemsInTheOneReport: every bad rate setting of every system
// is named in the one report, beside the other settings' problems.
func TestRateProblemsInTheOneReport(t *testing.T) {
	t.Parallel()
	_, err := config.LoadEnv(map[string]string{
		"PAYMENTS_BASE_URL":       goodURL,
		"PAYMENTS_RATE_LIMIT":     "100/sec",
		"PAYMENTS_RATE_BURST":     "-3",
		"PAYMENTS_RATE_SCOPE":     "everywhere",
		"PAYMENTS_RATE_MAX_WAIT":  "1m",
		"PAYMENTS_READ_TIMEOUT":   "0",
		"INVENTORY_BASE_URL":      goodURL,
		"INVENTORY_RATE_BURST":    "5",
		"INVENTORY_RATE_MAX_WAIT": "soon",
	}, config.System{Name: "payments"}, config.System{Name: "inventory"})
	var got []string
	for _, p := range problemsOf(t, err) {
		got = append(got, p.Var)
	}
	for _, v := range []string{"PAYMENTS_RATE_LIMIT", "PAYMENTS_RATE_BURST", "PAYMENTS_RATE_SCOPE", "PAYMENTS_RATE_MAX_WAIT",
		"PAYMENTS_READ_TIMEOUT", "INVENTORY_RATE_BURST", "INVENTORY_RATE_MAX_WAIT"} {
		if !slices.Contains(got, v) {
			t.Errorf("the report does not name %s: %v", v, got)
		}
	}
}

// TestRateValidValues: off, every period, an explicit burst, a fleet
// scope with its Redis and a wait below CALL_TIMEOUT load, and
// Client.Rate gives them parsed, the burst derived when RATE_BURST is 0.
func TestRateValidValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want config.Rate
	}{
		{map[string]string{}, config.Rate{}},
		{map[string]string{"RATE_LIMIT": "0", "RATE_BURST": "0", "RATE_SCOPE": "local", "RATE_MAX_WAIT": "0"}, config.Rate{}},
		{map[string]string{"RATE_LIMIT": "200/s"}, config.Rate{Events: 200, Per: time.Second, Burst: 10}},
		{map[string]string{"RATE_LIMIT": " 200/s "}, config.Rate{Events: 200, Per: time.Second, Burst: 10}},
		{map[string]string{"RATE_LIMIT": "201/s"}, config.Rate{Events: 201, Per: time.Second, Burst: 11}},
		{map[string]string{"RATE_LIMIT": "6000/m"}, config.Rate{Events: 6000, Per: time.Minute, Burst: 5}},
		{map[string]string{"RATE_LIMIT": "1000/h"}, config.Rate{Events: 1000, Per: time.Hour, Burst: 1}},
		{map[string]string{"RATE_LIMIT": "1/s"}, config.Rate{Events: 1, Per: time.Second, Burst: 1}},
		{map[string]string{"RATE_LIMIT": "1000000000/s"}, config.Rate{Events: 1e9, Per: time.Second, Burst: config.MaxRateBurst}},
		{map[string]string{"RATE_LIMIT": "200/s", "RATE_BURST": "3"}, config.Rate{Events: 200, Per: time.Second, Burst: 3}},
		{map[string]string{"RATE_LIMIT": "200/s", "RATE_BURST": "100000", "RATE_MAX_WAIT": "14999ms"}, config.Rate{Events: 200, Per: time.Second, Burst: 100000}},
	} {
		l, probs := loadPayments(t, config.Client{}, tc.env)
		if len(probs) != 0 {
			t.Errorf("%v:%s", tc.env, dump(probs))
			continue
		}
		if got := l.Client.Rate(); got != tc.want {
			t.Errorf("%v: Rate() = %+v, want %+v", tc.env, got, tc.want)
		}
	}
	env := map[string]string{"PAYMENTS_BASE_URL": goodURL, "PAYMENTS_RATE_LIMIT": "100/s", "PAYMENTS_RATE_SCOPE": "fleet", "PAYMENTS_RATE_MAX_WAIT": "50ms"}
	for k, v := range fleetRedis {
		env[k] = v
	}
	ls, err := config.LoadEnv(env, config.System{Name: "payments"})
	if err != nil || ls[0].Client.RateScope != "fleet" || ls[0].Client.RateMaxWait != 50*time.Millisecond {
		t.Fatalf("fleet scope with its Redis: %v, %v", ls, err)
	}
	if s := ls[0].Summary(); !strings.Contains(s, " rate=100/s burst 5 fleet wait 50ms") {
		t.Errorf("Summary() = %q, want the rate limit shown", s)
	}
	if b := config.Baseline(); b.RateLimit != "0" || b.RateBurst != 0 || b.RateScope != "local" || b.RateMaxWait != 0 || b.Rate().Limited() {
		t.Errorf("Baseline rate settings = %q %d %q %v, want 0, 0, local, 0: no limit", b.RateLimit, b.RateBurst, b.RateScope, b.RateMaxWait)
	}
	// A literal Defaults that says nothing of the rate keeps it off.
	if r := (config.Client{BaseURL: goodURL}).Rate(); r.Limited() {
		t.Errorf("zero Client Rate() = %+v, want no limit", r)
	}
}

// TestRateFromCodeDefaults: a service may declare its quota in code; the
// environment still wins, and turning the limit off under a burst from
// code is a problem on RATE_BURST that shows both sides.
func TestRateFromCodeDefaults(t *testing.T) {
	t.Parallel()
	d := config.Baseline()
	d.RateLimit, d.RateBurst = "50/s", 4 // the provider's contract
	l, probs := loadPayments(t, d, nil)
	if len(probs) != 0 || l.Client.Rate() != (config.Rate{Events: 50, Per: time.Second, Burst: 4}) || l.SourceOf("RATE_LIMIT") != config.FromCode {
		t.Errorf("code defaults: Rate() = %+v, source %s:%s", l.Client.Rate(), l.SourceOf("RATE_LIMIT"), dump(probs))
	}
	_, probs = loadPayments(t, d, map[string]string{"RATE_LIMIT": "0"})
	want := "PAYMENTS_RATE_BURST=4 (code default): needs a rate limit: RATE_LIMIT (= 0, env) is off"
	if len(probs) != 1 || probs[0].Error() != want {
		t.Errorf("limit turned off in env under a code burst:%s\nwant\n\t%s", dump(probs), want)
	}
}

// TestParseRate reads every spelling and renders it back.
func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]config.Rate{
		"0":       {},
		"200/s":   {Events: 200, Per: time.Second},
		"6000/m":  {Events: 6000, Per: time.Minute},
		"1000/h":  {Events: 1000, Per: time.Hour},
		"007/s":   {Events: 7, Per: time.Second},
		"\t5/m\n": {Events: 5, Per: time.Minute},
	} {
		got, err := config.ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := config.ParseRate(got.String()); err != nil || again != got {
			t.Errorf("ParseRate(%q).String() = %q does not read back: %+v, %v", in, got.String(), again, err)
		}
	}
	if got := (config.Rate{Events: 6000, Per: time.Minute}).PerSecond(); got != 100 {
		t.Errorf("6000/m PerSecond() = %v, want 100", got)
	}
	if got := config.DeriveBurst(config.Rate{Events: 200, Per: time.Second}); got != 10 {
		t.Errorf("DeriveBurst(200/s) = %d, want 10", got)
	}
	if got := config.DeriveBurst(config.Rate{}); got != 0 {
		t.Errorf("DeriveBurst(no limit) = %d, want 0", got)
	}
}

// FuzzParseRate: whatever the text, ParseRate does not panic; what it
// accepts is no limit or 1..MaxRateEvents per second, minute or hour, and
// reads back from its String.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"0", "200/s", "6000/m", "1000/h", "100", "100/sec", "0/s", "-5/s", "1.5/s", "+5/s", "NaN/s",
		"1000000001/s", "99999999999999999999/s", "/s", "s", "", " 1/h ", "1/s/s", "0x10/s", "1e3/s", "１/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := config.ParseRate(s)
		if err != nil {
			if r != (config.Rate{}) {
				t.Errorf("ParseRate(%q) = %+v with error %v; want the zero Rate", s, r, err)
			}
			return
		}
		if r.Burst != 0 {
			t.Errorf("ParseRate(%q) = %+v: a burst", s, r)
		}
		if !r.Limited() {
			if r != (config.Rate{}) {
				t.Errorf("ParseRate(%q) = %+v: neither off nor a limit", s, r)
			}
			return
		}
		if r.Events < 1 || r.Events > config.MaxRateEvents || (r.Per != time.Second && r.Per != time.Minute && r.Per != time.Hour) {
			t.Errorf("ParseRate(%q) = %+v: out of range", s, r)
		}
		if again, err := config.ParseRate(r.String()); err != nil || again != r {
			t.Errorf("ParseRate(%q).String() = %q reads back as %+v, %v", s, r.String(), again, err)
		}
		if b := config.DeriveBurst(r); b < 1 || b > config.MaxRateBurst {
			t.Errorf("DeriveBurst(%+v) = %d, want 1..%d", r, b, config.MaxRateBurst)
		}
	})
}
