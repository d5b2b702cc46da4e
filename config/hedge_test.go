package config_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
)

// TestHedgeRules: each bad hedging setting is one problem of the startup
// report, on its own variable.
func TestHedgeRules(t *testing.T) {
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{name: "delay at read timeout", env: map[string]string{"HEDGE_DELAY": "10s"}, wantVar: "HEDGE_DELAY",
			exact: "PAYMENTS_HEDGE_DELAY=10s: must be < READ_TIMEOUT (= 10s): a copy sent after the first attempt timed out is no hedge"},
		{name: "delay above a short read timeout", env: map[string]string{"HEDGE_DELAY": "600ms", "READ_TIMEOUT": "500ms",
			"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "100ms"}, wantVar: "HEDGE_DELAY", wantRule: "must be < READ_TIMEOUT (= 500ms)"},
		{name: "delay without unit", env: map[string]string{"HEDGE_DELAY": "20"}, wantVar: "HEDGE_DELAY", wantRule: "not 0, a duration (20ms) or a percentile"},
		{name: "delay negative", env: map[string]string{"HEDGE_DELAY": "-5ms"}, wantVar: "HEDGE_DELAY", wantRule: "must be > 0 (0 turns hedging off)"},
		{name: "delay word", env: map[string]string{"HEDGE_DELAY": "auto"}, wantVar: "HEDGE_DELAY", wantRule: "must be 0 (off), a duration or a percentile"},
		{name: "percentile low", env: map[string]string{"HEDGE_DELAY": "p49"}, wantVar: "HEDGE_DELAY", wantRule: "p50 to p99.9"},
		{name: "percentile 100", env: map[string]string{"HEDGE_DELAY": "p100"}, wantVar: "HEDGE_DELAY", wantRule: "p50 to p99.9"},
		{name: "percentile exponent", env: map[string]string{"HEDGE_DELAY": "p9e1"}, wantVar: "HEDGE_DELAY", wantRule: "p50 to p99.9"},
		{name: "max 0", env: map[string]string{"HEDGE_MAX": "0"}, wantVar: "HEDGE_MAX", wantRule: "must be between 1 and 3"},
		{name: "max 4", env: map[string]string{"HEDGE_MAX": "4"}, wantVar: "HEDGE_MAX", wantRule: "must be between 1 and 3"},
		{name: "floor above ceiling", env: map[string]string{"HEDGE_DELAY_MIN": "2s"}, wantVar: "HEDGE_DELAY_MIN", wantRule: "must be <= HEDGE_DELAY_MAX (= 1s, baseline default)"},
		{name: "floor 0", env: map[string]string{"HEDGE_DELAY_MIN": "0"}, wantVar: "HEDGE_DELAY_MIN", wantRule: "must be > 0"},
	})
}

// TestHedgeValidValues: off, durations below READ_TIMEOUT and
// percentiles p50..p99.9 load, and ParseHedgeDelay reads them.
func TestHedgeValidValues(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0", "20ms", "9.999s", "p50", "p95", "p99", "p99.9", " p95 "} {
		if _, probs := loadPayments(t, config.Client{}, map[string]string{"HEDGE_DELAY": v, "HEDGE_MAX": "3"}); len(probs) != 0 {
			t.Errorf("HEDGE_DELAY=%q: %s", v, dump(probs))
		}
	}
	// Hedging off leaves a short READ_TIMEOUT valid: the ceiling is not
	// compared with it (the registry caps the delay with it instead).
	if _, probs := loadPayments(t, config.Client{}, map[string]string{"READ_TIMEOUT": "300ms",
		"CONNECT_TIMEOUT": "100ms", "TLS_HANDSHAKE_TIMEOUT": "100ms"}); len(probs) != 0 {
		t.Errorf("short READ_TIMEOUT, hedging off: %s", dump(probs))
	}
	for _, tc := range []struct {
		in    string
		fixed time.Duration
		pct   float64
	}{{"0", 0, 0}, {"20ms", 20 * time.Millisecond, 0}, {"p95", 0, 95}, {"p99.9", 0, 99.9}} {
		fixed, pct, err := config.ParseHedgeDelay(tc.in)
		if err != nil || fixed != tc.fixed || pct != tc.pct {
			t.Errorf("ParseHedgeDelay(%q) = %v, %v, %v; want %v, %v, nil", tc.in, fixed, pct, err, tc.fixed, tc.pct)
		}
	}
	if b := config.Baseline(); b.HedgeDelay != "0" || b.HedgeMax != 1 {
		t.Errorf("Baseline hedging = %q x%d, want off (\"0\") and 1", b.HedgeDelay, b.HedgeMax)
	}
}

// TestHedgeDelayPercentileMustBeANumber: NaN and the infinities parse as
// floats but are no percentile; "pNaN" passed every comparison and hedged
// like p0. Each is refused, on the variable, whatever its spelling.
func TestHedgeDelayPercentileMustBeANumber(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"pNaN", "pnan", "pNAN", "pInf", "pinf", "p+Inf", "p-Inf", "pInfinity", "p+infinity", " pNaN "} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			if fixed, pct, err := config.ParseHedgeDelay(v); err == nil {
				t.Errorf("ParseHedgeDelay(%q) = %v, %v, nil; want an error", v, fixed, pct)
			}
			_, probs := loadPayments(t, config.Client{}, map[string]string{"HEDGE_DELAY": v})
			if len(probs) != 1 || probs[0].Var != "PAYMENTS_HEDGE_DELAY" || !strings.Contains(probs[0].Rule, "p50 to p99.9") {
				t.Errorf("HEDGE_DELAY=%q: want one problem on PAYMENTS_HEDGE_DELAY with the percentile range:%s", v, dump(probs))
			}
		})
	}
}

// FuzzParseHedgeDelay: whatever the text, ParseHedgeDelay does not panic,
// and what it accepts is off, a positive duration, or a finite
// percentile from 50 to 99.9, never two at once.
func FuzzParseHedgeDelay(f *testing.F) {
	for _, s := range []string{"0", "20ms", "1h", "-5ms", "p50", "p95", "p99.9", "p100", "p49.99", "pNaN", "pnan", "pInf",
		"p+Inf", "p9e1", "p0x1p6", "p9_5", "p", "", " p95 ", "P95", "p.95", "p95.", "p00095", "1e3ms", "NaN", "Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fixed, pct, err := config.ParseHedgeDelay(s)
		if err != nil {
			if fixed != 0 || pct != 0 {
				t.Errorf("ParseHedgeDelay(%q) = %v, %v with error %v; want zeros", s, fixed, pct, err)
			}
			return
		}
		switch {
		case fixed < 0:
			t.Errorf("ParseHedgeDelay(%q): negative delay %v", s, fixed)
		case pct != 0 && (fixed != 0 || math.IsNaN(pct) || math.IsInf(pct, 0) || pct < 50 || pct > 99.9):
			t.Errorf("ParseHedgeDelay(%q) = %v, %v: a percentile must be finite, 50..99.9, alone", s, fixed, pct)
		case math.IsNaN(pct):
			t.Errorf("ParseHedgeDelay(%q): NaN percentile", s)
		}
	})
}
