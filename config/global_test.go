package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// TestGlobalReferenceIsTheChecks: the rule GlobalReference documents for
// each registry-wide variable holds the words of the problem Load reports
// for a bad value of it, so that the reference cannot drift from the
// check (both come from the same constants).
func TestGlobalReferenceIsTheChecks(t *testing.T) {
	t.Parallel()
	ref := map[string]config.Var{}
	for _, v := range config.GlobalReference() {
		if v.System != "" {
			t.Errorf("%s: System %q, want empty", v.Name, v.System)
		}
		ref[v.Name] = v
	}
	for _, tc := range []struct {
		env   map[string]string
		words string // of the problem's rule, after "must be " when there is one
	}{
		{map[string]string{config.SystemsVar: "Ledger"}, "lower case letters, digits, '-' or '_', starting with a letter"},
		{map[string]string{config.SystemsVar: strings.Repeat("a", 64)}, "63 bytes"},
		{map[string]string{config.FaultsVar: "yes"}, "on or off (unset: off); on allows the <SYSTEM>_FAULT_* drills"},
		{map[string]string{config.FleetRedisURLVar: "https://redis.internal", config.FleetNamespaceVar: "checkout"}, "a redis:// or rediss:// URL"},
		{map[string]string{config.FleetNamespaceVar: "a:b"}, "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"},
		{map[string]string{config.FleetRedisURLVar: "redis://redis.internal"}, "required with " + config.FleetRedisURLVar},
	} {
		_, err := config.LoadEnv(tc.env, config.System{Name: "payments", Defaults: config.Client{BaseURL: "http://payments.internal"}})
		var ce *config.Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 {
			t.Errorf("%v: err = %v, want one problem", tc.env, err)
			continue
		}
		p := ce.Problems[0]
		v, ok := ref[p.Var]
		if !ok {
			t.Errorf("%v: problem of %s, which GlobalReference does not list", tc.env, p.Var)
			continue
		}
		if !strings.Contains(p.Rule, tc.words) || !strings.Contains(v.Rule, tc.words) {
			t.Errorf("%s: problem %q, reference rule %q: want both to say %q", p.Var, p.Rule, v.Rule, tc.words)
		}
	}
	if v := ref[config.FleetRedisURLVar]; !v.Secret {
		t.Errorf("%s is not marked secret", v.Name)
	}
	if v := ref[config.FaultsVar]; v.Default != "off" {
		t.Errorf("%s default %q, want off", v.Name, v.Default)
	}
}
