package config

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/outbound-go/outbound/internal/redact"
)

// The variables of a fleet-shared breaker. They belong to the registry,
// not to one system, so they are not fields of [Client]; their rules are
// stated once, in [Fleet.Validate].
const (
	// FleetRedisURLVar names the fleet's Redis: a redis:// or rediss://
	// URL; with cluster=true in its query, a Redis Cluster's, more of its
	// nodes as addr=host:port ([Fleet.Cluster]). Its password is
	// redacted in every report. Systems with BREAKER_SCOPE=fleet or
	// RATE_SCOPE=fleet need it.
	FleetRedisURLVar = "OUTBOUND_FLEET_REDIS_URL"
	// FleetNamespaceVar names the service in the fleet's keys, so that two
	// services sharing one Redis never share a breaker or a quota.
	// Required with OUTBOUND_FLEET_REDIS_URL.
	FleetNamespaceVar = "OUTBOUND_FLEET_NAMESPACE"
)

// Fleet is the registry-wide settings of a fleet-shared breaker, read from
// OUTBOUND_FLEET_*. The zero value is "no fleet". Printing a Fleet
// redacts the URL's password.
type Fleet struct {
	RedisURL  string
	Namespace string
}

// String shows the settings with the URL redacted.
func (f Fleet) String() string {
	return fmt.Sprintf("{RedisURL:%s Namespace:%s}", redact.Show(redact.RedisURL(f.RedisURL)), redact.Show(f.Namespace))
}

// GoString is String, so that %#v does not show the password either.
func (f Fleet) GoString() string { return f.String() }

// RedactedURL is RedisURL as every report and status shows it: its
// password (and any token-like query value) replaced by REDACTED, but the
// nodes of a Redis Cluster's URL (cluster=, each addr= that is a host and
// port) kept, as an operator needs to see which nodes the pod was given.
// The fleet module shows its URL this way too.
func (f Fleet) RedactedURL() string { return redact.RedisURL(f.RedisURL) }

var namespaceRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate checks the settings: a RedisURL, when set, is a redis:// or
// rediss:// URL with a host, or a Redis Cluster's ([Fleet.Cluster]), and
// comes with a Namespace of 1-64 letters, digits, '.', '_' or '-'. It
// returns an [*Error] naming each variable at fault, or nil.
func (f Fleet) Validate() error {
	if probs := f.problems(FromEnv); len(probs) > 0 {
		return &Error{Problems: probs}
	}
	return nil
}

func (f Fleet) problems(src Source) []Problem {
	var probs []Problem
	if f.RedisURL != "" {
		if _, msg := parseRedis(f.RedisURL); msg != "" {
			// Shown only as far as a password can be told apart from
			// the rest: a bare password pasted by mistake never is.
			probs = append(probs, Problem{Var: FleetRedisURLVar, Value: redact.RedisURL(f.RedisURL), Source: src, Rule: msg})
		}
	}
	switch {
	case f.Namespace == "" && f.RedisURL != "":
		probs = append(probs, Problem{Var: FleetNamespaceVar, Source: FromBaseline,
			Rule: namespaceNeeded + ": name the service (e.g. checkout), so that two services on one Redis never share a breaker or a quota"})
	case f.Namespace != "" && !namespaceRE.MatchString(f.Namespace):
		probs = append(probs, Problem{Var: FleetNamespaceVar, Value: f.Namespace, Source: src,
			Rule: "must be " + namespaceShape})
	}
	return probs
}

// Cluster reports whether RedisURL names a Redis Cluster: a redis:// or
// rediss:// (TLS) URL with cluster=true in its query. The URL's host is
// one node of the cluster; each addr=host:port of its query names
// another, in case that one is down when a pod starts (go-redis's
// cluster URL, with cluster=true to tell it from a single Redis's):
//
//	rediss://:password@redis-0.redis:6379?cluster=true&addr=redis-1.redis:6379&addr=redis-2.redis:6379
//
// The client learns the others from any node that answers. A cluster
// has only database 0: the URL has no other. [Fleet.Redis] reads the
// rest of the URL.
func (f Fleet) Cluster() bool {
	u, err := url.Parse(f.RedisURL)
	if err != nil {
		return false
	}
	q, err := url.ParseQuery(u.RawQuery)
	cluster, ok := clusterFlag(q)
	return err == nil && ok && cluster
}

// LoadFleet reads OUTBOUND_FLEET_* from the process environment and
// validates them ([Fleet.Validate]); [Load] reports the same problems.
func LoadFleet() (Fleet, error) {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OUTBOUND_FLEET_") {
			env[k] = v
		}
	}
	return LoadFleetEnv(env)
}

// LoadFleetEnv is [LoadFleet] with the environment given as a map.
func LoadFleetEnv(env map[string]string) (Fleet, error) {
	f, probs := loadFleet(env)
	if len(probs) > 0 {
		return f, &Error{Problems: probs}
	}
	return f, nil
}

// loadFleet reads and checks OUTBOUND_FLEET_*; an unknown variable under
// that prefix (OUTBOUND_FLEET_REDIS_ULR) is a problem too.
func loadFleet(env map[string]string) (Fleet, []Problem) {
	f := Fleet{RedisURL: strings.TrimSpace(env[FleetRedisURLVar]), Namespace: strings.TrimSpace(env[FleetNamespaceVar])}
	probs := f.problems(FromEnv)
	var unknown []string
	for k := range env {
		if strings.HasPrefix(k, "OUTBOUND_FLEET_") && k != FleetRedisURLVar && k != FleetNamespaceVar {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		probs = append(probs, Problem{Var: k, Value: redacted, Source: FromEnv,
			Rule: "matches no fleet setting (" + FleetRedisURLVar + ", " + FleetNamespaceVar + ")"})
	}
	return f, probs
}
