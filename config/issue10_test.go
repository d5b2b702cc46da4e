package config_test

import (
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// loadEnv loads systems from env alone, the process environment aside.
func loadEnv(t *testing.T, env map[string]string, systems ...config.System) ([]config.Loaded, []config.Problem, error) {
	t.Helper()
	setEnv(t, env)
	ls, err := config.Load(systems...)
	return ls, problemsOf(t, err), err
}

// TestIssue10BaseURLPort: a BASE_URL with port 0 or 99999 passed
// validation, and every call then failed (issue #10, item 12).
func TestIssue10BaseURLPort(t *testing.T) {
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
