package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// TestFleetVariablesInTheStartupReport: BREAKER_SCOPE and OUTBOUND_FLEET_*
// are checked in the one startup report; the Redis password never shows; an
// unreachable Redis is no concern of config (it is never dialled here).
func TestFleetVariablesInTheStartupReport(t *testing.T) {
	t.Parallel()
	const pw = "hunter2"
	base := map[string]string{"PAYMENTS_BASE_URL": "https://pay.internal"}
	with := func(kv ...string) map[string]string {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string // "VAR: words of the rule"; nil: valid
	}{
		{"baseline is local", with(), nil},
		{"fleet with a Redis", with("PAYMENTS_BREAKER_SCOPE", "fleet",
			"OUTBOUND_FLEET_REDIS_URL", "rediss://:"+pw+"@redis.internal:6380/1", "OUTBOUND_FLEET_NAMESPACE", "checkout"), nil},
		{"a Redis nobody uses", with("OUTBOUND_FLEET_REDIS_URL", "redis://127.0.0.1:1", "OUTBOUND_FLEET_NAMESPACE", "checkout"), nil},
		{"fleet without a Redis", with("PAYMENTS_BREAKER_SCOPE", "fleet"),
			[]string{"PAYMENTS_BREAKER_SCOPE=fleet: scope fleet needs OUTBOUND_FLEET_REDIS_URL"}},
		{"unknown scope", with("PAYMENTS_BREAKER_SCOPE", "global"),
			[]string{"PAYMENTS_BREAKER_SCOPE=global: must be one of: local, fleet"}},
		{"bad scheme", with("PAYMENTS_BREAKER_SCOPE", "fleet",
			"OUTBOUND_FLEET_REDIS_URL", "https://user:"+pw+"@redis.internal", "OUTBOUND_FLEET_NAMESPACE", "checkout"),
			[]string{"OUTBOUND_FLEET_REDIS_URL=https://REDACTED@redis.internal: must be a redis:// or rediss:// URL"}},
		{"no host", with("OUTBOUND_FLEET_REDIS_URL", "redis://", "OUTBOUND_FLEET_NAMESPACE", "checkout"),
			[]string{"OUTBOUND_FLEET_REDIS_URL=redis://: must name a host"}},
		{"no namespace", with("OUTBOUND_FLEET_REDIS_URL", "redis://:"+pw+"@redis:6379"),
			[]string{"OUTBOUND_FLEET_NAMESPACE (unset): required with OUTBOUND_FLEET_REDIS_URL"}},
		{"bad namespace", with("OUTBOUND_FLEET_REDIS_URL", "redis://redis:6379", "OUTBOUND_FLEET_NAMESPACE", "a:b"),
			[]string{"OUTBOUND_FLEET_NAMESPACE=a:b: must be 1-64 letters"}},
		{"typo", with("OUTBOUND_FLEET_NAMESPCE", "checkout"),
			[]string{"OUTBOUND_FLEET_NAMESPCE=REDACTED: matches no fleet setting"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.LoadEnv(tc.env, config.System{Name: "payments"})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			var cerr *config.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("the report shows the password: %v", err)
			}
			if len(cerr.Problems) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(cerr.Problems), len(tc.want), err)
			}
			for i, w := range tc.want {
				if got := cerr.Problems[i].Error(); !strings.HasPrefix(got, w) {
					t.Errorf("problem %d = %q, want prefix %q", i, got, w)
				}
			}
		})
	}
}

// TestLoadFleetEnvHasTheSameRules: the fleet module reads the same
// settings through LoadFleetEnv, with the same rules, and never prints the
// password.
func TestLoadFleetEnvHasTheSameRules(t *testing.T) {
	t.Parallel()
	f, err := config.LoadFleetEnv(map[string]string{"OUTBOUND_FLEET_REDIS_URL": "redis://:pw@r:6379", "OUTBOUND_FLEET_NAMESPACE": "checkout"})
	if err != nil || f.RedisURL != "redis://:pw@r:6379" || f.Namespace != "checkout" {
		t.Fatalf("LoadFleetEnv = %+v, %v", f, err)
	}
	if s := f.String(); strings.Contains(s, "pw@") {
		t.Errorf("String() = %s shows the password", s)
	}
	if err := (config.Fleet{RedisURL: "http://r"}).Validate(); err == nil || len(err.(*config.Error).Problems) != 2 {
		t.Errorf("Validate of a bad URL without namespace = %v, want 2 problems", err)
	}
}

// TestRedisClusterURL: OUTBOUND_FLEET_REDIS_URL names a Redis Cluster
// with cluster=true in the query of its redis:// or rediss:// URL, with
// more of its nodes as addr=host:port; an addr= without it, a bad addr=,
// a cluster= that is neither true nor false or a database other than 0
// is a problem that never shows the password.
func TestRedisClusterURL(t *testing.T) {
	t.Parallel()
	const pw = "hunter2"
	for _, tc := range []struct {
		url     string
		cluster bool
		want    string // the problem's rule; "": valid
	}{
		{"redis://10.0.0.1:6379?cluster=true", true, ""},
		{"rediss://:" + pw + "@redis-0.redis:6379?cluster=true&addr=redis-1.redis:6379&addr=redis-2.redis:6379", true, ""},
		{"redis://user:" + pw + "@[::1]:7000/0?addr=[::1]:7001&cluster=true", true, ""},
		{"REDIS://r:6379?cluster=TRUE", true, ""},
		{"redis://:" + pw + "@r:6379/2", false, ""},
		{"redis://:" + pw + "@r:6379/2?cluster=false", false, ""},
		{"redis://:" + pw + "@r1:6379?addr=r2:6379", false, "addr= names more nodes of a Redis Cluster: add cluster=true"},
		{"redis://:" + pw + "@r1:6379?cluster=yes", false, "cluster= must be true (a Redis Cluster) or false, once"},
		{"redis://:" + pw + "@r1:6379?cluster=true&cluster=false", false, "cluster= must be true"},
		{"redis://:" + pw + "@r1:6379/3?cluster=true", true, "a Redis Cluster has only database 0"},
		{"redis://:" + pw + "@r1:6379?cluster=true&addr=r2", true, "addr= number 1 must be host:port"},
		{"redis://:" + pw + "@r1:6379?cluster=true&addr=r2:6379&addr=r3:99999", true, "addr= number 2 must be host:port, port 1..65535"},
		{"redis://:" + pw + "@r1:6379?cluster=true&addr=:6379", true, "addr= number 1 must be host:port"},
		{"redis://:" + pw + "@r1:6379?cluster=true&addr=%zz", false, "the query does not parse"},
		{"redis://:" + pw + "@:6379?cluster=true", true, "must name a host"},
		{"redis+cluster://:" + pw + "@r1:6379", false, "must be a redis:// or rediss:// URL"},
	} {
		f := config.Fleet{RedisURL: tc.url, Namespace: "checkout"}
		if got := f.Cluster(); got != tc.cluster {
			t.Errorf("%s: Cluster() = %v, want %v", tc.url, got, tc.cluster)
		}
		err := f.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want valid", tc.url, err)
			}
			continue
		}
		var ce *config.Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 {
			t.Errorf("%s: %v, want one problem", tc.url, err)
			continue
		}
		if p := ce.Problems[0]; p.Var != config.FleetRedisURLVar || !strings.Contains(p.Rule, tc.want) {
			t.Errorf("%s: problem %q, want %s saying %q", tc.url, p, config.FleetRedisURLVar, tc.want)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: the problem shows the password: %v", tc.url, err)
		}
	}
}

// TestFleetRedisReadsTheURL: Fleet.Redis is the one reading of the URL the
// fleet dials; printed, it hides the password.
func TestFleetRedisReadsTheURL(t *testing.T) {
	t.Parallel()
	r, err := config.Fleet{RedisURL: "rediss://u:hunter2@r0:7000?cluster=true&addr=r1:7001&skip_verify=true", Namespace: "ns"}.Redis()
	if err != nil {
		t.Fatal(err)
	}
	if !r.TLS || !r.Cluster || !r.SkipVerify || r.Host != "r0" || r.Username != "u" || r.Password != "hunter2" ||
		strings.Join(r.Addrs, ",") != "r0:7000,r1:7001" {
		t.Errorf("Redis() = %+v", r)
	}
	for _, s := range []string{fmt.Sprint(r), fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r)} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("printed: %s", s)
		}
	}
	if r, err := (config.Fleet{RedisURL: "redis://r0/5"}).Redis(); err != nil || r.DB != 5 || r.Addrs[0] != "r0:6379" {
		t.Errorf("Redis() = %+v, %v; want db 5 on r0:6379", r, err)
	}
	_, err = config.Fleet{RedisURL: "redis://:hunter2@r0?db=x"}.Redis()
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "db= must be a database number") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Redis() of db=x: %v", err)
	}
}
