package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/outbound-go/outbound/internal/redact"
)

// Redis is what OUTBOUND_FLEET_REDIS_URL names, as [Fleet.Redis] reads
// it. It is the one reading of that URL: `outbound check`, [Load] and the
// fleet module's dial all take it from here, so a URL the check passes is
// a URL the pod dials, and one it refuses is refused at start with the
// same reason. Printing a Redis (%v, %+v, %#v) hides the password.
type Redis struct {
	// TLS is true for rediss://.
	TLS bool
	// Host is the URL's host, without brackets or port: the name a TLS
	// certificate must hold.
	Host string
	// Addrs are host:port: the URL's host (port 6379 when it has none),
	// then each addr= of a cluster's URL.
	Addrs []string
	// Username and Password are the URL's userinfo.
	Username, Password string
	// DB is the database of a single Redis: the path (/3) or db=3; a
	// cluster has only 0.
	DB int
	// Cluster is true with cluster=true: Addrs are nodes of a Redis
	// Cluster.
	Cluster bool
	// SkipVerify is skip_verify=true (rediss:// only): the server's
	// certificate is not verified.
	SkipVerify bool
}

// String shows r with its password hidden.
func (r Redis) String() string {
	pw := ""
	if r.Password != "" {
		pw = redacted
	}
	return fmt.Sprintf("{TLS:%v Addrs:%v Username:%s Password:%s DB:%d Cluster:%v SkipVerify:%v}",
		r.TLS, r.Addrs, redact.Show(r.Username), pw, r.DB, r.Cluster, r.SkipVerify)
}

// GoString is String.
func (r Redis) GoString() string { return r.String() }

// Redis reads RedisURL. The error, when the URL is refused, is an
// [*Error] whose problem is the one [Fleet.Validate] reports for it.
func (f Fleet) Redis() (Redis, error) {
	r, msg := parseRedis(f.RedisURL)
	if msg != "" {
		return Redis{}, &Error{Problems: []Problem{{Var: FleetRedisURLVar, Value: redact.RedisURL(f.RedisURL), Source: FromEnv, Rule: msg}}}
	}
	return r, nil
}

// ClusterParam is the query parameter of OUTBOUND_FLEET_REDIS_URL that
// says the URL names a Redis Cluster (cluster=true).
const ClusterParam = "cluster"

// redisSchemes are the schemes of OUTBOUND_FLEET_REDIS_URL.
var redisSchemes = map[string]bool{"redis": true, "rediss": true}

// redisParams are the query parameters OUTBOUND_FLEET_REDIS_URL takes.
var redisParams = []string{ClusterParam, "addr", "db", "skip_verify"}

// redisOptions are [redisParams] as the reference and the problems list
// them.
const redisOptions = "cluster=, addr= (a cluster's), db= (a single Redis's), skip_verify= (rediss://)"

// redisSetByFleet are go-redis's URL options that the fleet sets itself:
// it bounds each round trip by its own timeout, retries on its next tick
// and sizes its own pool. Given in the URL they would be overridden, so
// they are refused with that reason rather than as unknown.
var redisSetByFleet = []string{
	"dial_timeout", "read_timeout", "write_timeout", "pool_timeout", "pool_size",
	"max_retries", "min_retry_backoff", "max_retry_backoff", "dialer_retries",
	"dialer_retry_timeout", "max_redirects", "conn_max_idle_time", "conn_max_lifetime",
}

// dbPathRE is the path of a single Redis's URL: none, "/" or a database
// number.
var dbPathRE = regexp.MustCompile(`^(?:/(?:[0-9]{1,9})?)?$`)

// dbRE is the value of db=: a database number.
var dbRE = regexp.MustCompile(`^[0-9]{1,9}$`)

// parseRedis reads a fleet Redis URL; msg says why it is refused ("" when
// it is not).
func parseRedis(s string) (r Redis, msg string) {
	u, err := url.Parse(s)
	switch {
	case redact.IsHostPort(s):
		return r, "the scheme is missing: start it with redis:// or rediss://"
	case err != nil || redact.UserinfoOutsideAuthority(s):
		return r, "not a URL: if the password holds '/', '?', '#', '@' or '%', percent-encode them (%2F, %3F, %23, %40, %25)"
	case !redisSchemes[u.Scheme]:
		return r, "must be " + redisURLScheme + " (e.g. rediss://:password@redis.internal:6379/0)"
	case u.Hostname() == "":
		return r, "must name a host"
	case u.Port() != "" && !validPort(u.Port()):
		return r, "port must be 1..65535"
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return r, "the query does not parse: percent-encode '%', '&' and ';' in its values"
	}
	if msg := unknownRedisOption(q); msg != "" {
		return r, msg
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	r = Redis{TLS: u.Scheme == "rediss", Host: u.Hostname(), Addrs: []string{net.JoinHostPort(u.Hostname(), port)}}
	if u.User != nil {
		r.Username = u.User.Username()
		r.Password, _ = u.User.Password()
	}
	var ok bool
	if r.Cluster, ok = clusterFlag(q); !ok {
		return Redis{}, "cluster= must be true (a Redis Cluster) or false, once"
	}
	if msg := r.readDB(u.Path, q); msg != "" {
		return Redis{}, msg
	}
	if msg := r.readNodes(q["addr"]); msg != "" {
		return Redis{}, msg
	}
	if msg := r.readSkipVerify(q["skip_verify"]); msg != "" {
		return Redis{}, msg
	}
	return r, ""
}

// unknownRedisOption says which parameter of q the URL does not take, or
// "".
func unknownRedisOption(q url.Values) string {
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		switch {
		case slices.Contains(redisParams, k):
			continue
		case slices.Contains(redisSetByFleet, k):
			return "option " + redact.Show(k) + "= is the fleet's own (each round trip is bounded by fleet.Config.Timeout and retried on the next tick): drop it; the URL takes " + redisOptions
		case slices.Contains(redisParams, strings.ToLower(k)):
			return "option " + redact.Show(k) + "= is unknown: options are lower case (" + strings.ToLower(k) + "=)"
		}
		return "option " + redact.Show(k) + "= is unknown: the URL takes " + redisOptions
	}
	return ""
}

// readDB reads the database from the path and db=: once, a number, and 0
// for a cluster.
func (r *Redis) readDB(path string, q url.Values) string {
	if !dbPathRE.MatchString(path) {
		return "the path is the database number (/0, /3): " + redact.Show(path) + " is not one"
	}
	db := strings.TrimPrefix(path, "/")
	switch vs := q["db"]; {
	case len(vs) > 1 || (len(vs) == 1 && db != ""):
		return "the database is given twice (path and db=, or db= twice): give it once"
	case len(vs) == 1:
		if !dbRE.MatchString(vs[0]) {
			return "db= must be a database number (0, 3)"
		}
		db = vs[0]
	}
	if db == "" {
		return ""
	}
	n, _ := strconv.Atoi(db) // at most 9 digits: fits
	if r.Cluster && n != 0 {
		return "a Redis Cluster has only database 0: drop the path and db="
	}
	if r.Cluster && len(q["db"]) > 0 {
		return "a Redis Cluster has only database 0: drop db="
	}
	r.DB = n
	return ""
}

// readNodes reads addr=, a cluster's other nodes.
func (r *Redis) readNodes(addrs []string) string {
	if !r.Cluster && len(addrs) > 0 {
		return "addr= names more nodes of a Redis Cluster: add cluster=true to the query"
	}
	for i, a := range addrs {
		h, p, err := net.SplitHostPort(a)
		if err != nil || h == "" || !validPort(p) {
			return fmt.Sprintf("addr= number %d must be host:port, port 1..65535", i+1)
		}
		r.Addrs = append(r.Addrs, net.JoinHostPort(h, p))
	}
	return ""
}

// readSkipVerify reads skip_verify=, which only a rediss:// URL takes.
func (r *Redis) readSkipVerify(vs []string) string {
	switch {
	case len(vs) == 0:
		return ""
	case !r.TLS:
		return "skip_verify= is for TLS: it needs a rediss:// URL"
	case len(vs) > 1 || !slices.Contains([]string{"true", "false"}, vs[0]):
		return "skip_verify= must be true or false, once"
	}
	r.SkipVerify = vs[0] == "true"
	return ""
}

// clusterFlag reads cluster= from a URL's query: absent is false; ok is
// false when it is given twice or is neither true nor false.
func clusterFlag(q url.Values) (cluster, ok bool) {
	flag := q[ClusterParam]
	switch {
	case len(flag) == 0:
		return false, true
	case len(flag) > 1:
		return false, false
	}
	return strings.EqualFold(flag[0], "true"), strings.EqualFold(flag[0], "true") || strings.EqualFold(flag[0], "false")
}
