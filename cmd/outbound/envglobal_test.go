package main

import (
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// TestEnvGlobalVariables: every format lists the registry's variables
// (OUTBOUND_SYSTEMS, OUTBOUND_FAULTS, OUTBOUND_FLEET_REDIS_URL,
// OUTBOUND_FLEET_NAMESPACE) with the default and rule config states for
// them, the Redis URL as a secret; a Redis password in the environment
// shows in none of them.
func TestEnvGlobalVariables(t *testing.T) {
	const pw = "s3cr3t-pw"
	cleanEnv(t, config.SystemsVar, "payments",
		config.FleetRedisURLVar, "rediss://:"+pw+"@redis.internal:6380/0", config.FleetNamespaceVar, "checkout")
	globals := config.GlobalReference()
	var names []string
	for _, v := range globals {
		names = append(names, v.Name)
	}
	if want := []string{config.SystemsVar, config.FaultsVar, config.FleetRedisURLVar, config.FleetNamespaceVar}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("GlobalReference lists %v, want %v", names, want)
	}
	out := map[string]string{}
	for _, format := range []string{"table", "dotenv", "configmap"} {
		code, o, errOut := runOut(t, "env", "--format", format)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, errOut)
		}
		if strings.Contains(o, pw) {
			t.Errorf("%s: the Redis password is in the output:\n%s", format, o)
		}
		out[format] = o
	}

	rows := map[string]string{} // table: NAME -> its line
	for _, l := range strings.Split(out["table"], "\n") {
		if name, _, ok := strings.Cut(l, " "); ok {
			rows[name] = l
		}
	}
	for _, v := range globals {
		if v.Rule == "" || v.Description == "" || v.Type == "" {
			t.Errorf("%s: type %q, rule %q, description %q: want all three", v.Name, v.Type, v.Rule, v.Description)
		}
		def := v.Default
		if def == "" {
			def = "-"
		}
		row := rows[v.Name]
		if !strings.Contains(row, " "+v.Type+" ") || !strings.Contains(row, " "+def+" ") || !strings.Contains(row, v.Rule) {
			t.Errorf("table: %s row %q, want type %s, default %s, rule %q", v.Name, row, v.Type, def, v.Rule)
		}
		if v.Secret != strings.HasSuffix(row, "[secret]") {
			t.Errorf("table: %s row %q, secret %v", v.Name, row, v.Secret)
		}

		set := v.Name + "=" + v.Default
		if v.Name == config.SystemsVar {
			set = v.Name + "=payments"
		}
		if !strings.Contains(out["dotenv"], "; "+v.Rule+")\n") || !strings.Contains(out["dotenv"], "\n"+set+"\n") {
			t.Errorf("dotenv: no rule %q or no line %q", v.Rule, set)
		}

		cm := out["configmap"]
		data := cm[strings.Index(cm, "\ndata:\n"):]
		switch {
		case v.Secret:
			if !strings.Contains(cm, "\n#   "+v.Name+"\n") || strings.Contains(data, v.Name) {
				t.Errorf("configmap: secret %s is not in the header only", v.Name)
			}
		case v.Name == config.SystemsVar:
			if !strings.Contains(data, "\n  "+v.Name+": \"payments\"\n") {
				t.Errorf("configmap: %s is not set to the declared systems", v.Name)
			}
		default:
			if !strings.Contains(data, "\n  # "+v.Name+": \""+v.Default+"\"\n") {
				t.Errorf("configmap: %s is not listed at its default %q", v.Name, v.Default)
			}
		}
	}
	if !globals[2].Secret || globals[2].Name != config.FleetRedisURLVar {
		t.Errorf("%s is not secret", config.FleetRedisURLVar)
	}
}
