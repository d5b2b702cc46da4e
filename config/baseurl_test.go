package config_test

import (
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// TestBaseURLPortMustBeUsable: a port of 0 or above 65535 parses, and
// every call would then fail; it is refused with the port range.
func TestBaseURLPortMustBeUsable(t *testing.T) {
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
