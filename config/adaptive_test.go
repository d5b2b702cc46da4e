package config_test

import (
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// TestAdaptiveConcurrencyVariables: ADAPTIVE_CONCURRENCY and
// MIN_CONCURRENT load, their rules (1 <= MIN_CONCURRENT <= MAX_CONCURRENT)
// are in the one report, and the summary line shows the adaptive range.
func TestAdaptiveConcurrencyVariables(t *testing.T) {
	env := map[string]string{
		"OUTBOUND_SYSTEMS":         "pay",
		"PAY_BASE_URL":             "http://pay.internal",
		"PAY_ADAPTIVE_CONCURRENCY": "true",
		"PAY_MIN_CONCURRENT":       "4",
		"PAY_MAX_CONCURRENT":       "48",
	}
	loaded, err := config.LoadEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	c := loaded[0].Client
	if !c.AdaptiveConcurrency || c.MinConcurrent != 4 || c.MaxConcurrent != 48 {
		t.Fatalf("loaded %v, want adaptive 4..48", c)
	}
	if s := loaded[0].Summary(); !strings.Contains(s, " max_concurrent=48 adaptive=4..48 ") {
		t.Errorf("summary %q, want max_concurrent=48 adaptive=4..48", s)
	}
	if b := config.Baseline(); b.AdaptiveConcurrency || b.MinConcurrent != 1 {
		t.Errorf("baseline adaptive %v, floor %d; want false, 1", b.AdaptiveConcurrency, b.MinConcurrent)
	}

	for _, tc := range []struct{ min, max, want string }{
		{"0", "8", "PAY_MIN_CONCURRENT=0: must be between 1 and 10000"},
		{"9", "8", "PAY_MIN_CONCURRENT=9: must be <= MAX_CONCURRENT (= 8, env)"},
		{"2", "1", "PAY_MIN_CONCURRENT=2: must be <= MAX_CONCURRENT (= 1, env)"},
	} {
		env["PAY_MIN_CONCURRENT"], env["PAY_MAX_CONCURRENT"] = tc.min, tc.max
		_, err := config.LoadEnv(env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MIN %s, MAX %s: %v, want %q", tc.min, tc.max, err, tc.want)
		}
	}
}
