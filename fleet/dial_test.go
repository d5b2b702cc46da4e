package fleet

import (
	"net/url"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/config"
)

// goRedisURL is u without outbound's cluster= parameter, which go-redis
// does not know.
func goRedisURL(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Del(config.ClusterParam)
	p.RawQuery = q.Encode()
	return p.String()
}

// The fleet dials what config reads from the URL, and that is what
// go-redis's own parser would read: the same addresses, credentials,
// database and TLS, for a single Redis and for a cluster. So config's
// rules accept no URL go-redis would refuse, and refuse none for a reason
// of their own but those they state.
func TestDialReadsTheURLAsGoRedisDoes(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"redis://127.0.0.1:6390",
		"redis://r.internal",
		"redis://user:p%40ss@r.internal:6390/3",
		"redis://:pw@r.internal:6390/",
		"redis://r.internal:6390?db=2",
		"redis://[::1]:6390/1",
		"rediss://:pw@r.internal:6390/0",
		"rediss://r.internal:6390?skip_verify=true",
		"REDIS://r.internal:6390?cluster=false",
	} {
		rdb, err := newClient(&Config{RedisURL: u, Namespace: "ns"})
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		got := rdb.(*redis.Client).Options()
		rdb.Close()
		want, err := redis.ParseURL(goRedisURL(t, u))
		if err != nil {
			t.Errorf("%s: config accepts it, go-redis says %v", u, err)
			continue
		}
		if got.Network != want.Network || got.Addr != want.Addr || got.Username != want.Username ||
			got.Password != want.Password || got.DB != want.DB || (got.TLSConfig == nil) != (want.TLSConfig == nil) {
			t.Errorf("%s: dials %s %s db %d user %q tls %v, go-redis reads %s %s db %d user %q tls %v", u,
				got.Network, got.Addr, got.DB, got.Username, got.TLSConfig != nil,
				want.Network, want.Addr, want.DB, want.Username, want.TLSConfig != nil)
			continue
		}
		if got.TLSConfig != nil && (got.TLSConfig.ServerName != want.TLSConfig.ServerName ||
			got.TLSConfig.InsecureSkipVerify != want.TLSConfig.InsecureSkipVerify) {
			t.Errorf("%s: TLS %q skip %v, go-redis %q skip %v", u, got.TLSConfig.ServerName, got.TLSConfig.InsecureSkipVerify,
				want.TLSConfig.ServerName, want.TLSConfig.InsecureSkipVerify)
		}
	}
	for _, u := range []string{
		"redis://127.0.0.1:7000?cluster=true",
		"rediss://u:pw@r0.internal:7000/0?cluster=true&addr=r1.internal:7001&addr=[::1]:7002",
		"redis://r0.internal?cluster=TRUE&addr=r1.internal:7001",
	} {
		rdb, err := newClient(&Config{RedisURL: u, Namespace: "ns"})
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		got := rdb.(*redis.ClusterClient).Options()
		rdb.Close()
		want, err := redis.ParseClusterURL(goRedisURL(t, u))
		if err != nil {
			t.Errorf("%s: config accepts it, go-redis says %v", u, err)
			continue
		}
		if !slices.Equal(got.Addrs, want.Addrs) || got.Username != want.Username || got.Password != want.Password ||
			(got.TLSConfig == nil) != (want.TLSConfig == nil) {
			t.Errorf("%s: dials %v user %q tls %v, go-redis reads %v user %q tls %v", u,
				got.Addrs, got.Username, got.TLSConfig != nil, want.Addrs, want.Username, want.TLSConfig != nil)
		}
		if got.TLSConfig != nil && got.TLSConfig.ServerName != want.TLSConfig.ServerName {
			t.Errorf("%s: TLS %q, go-redis %q", u, got.TLSConfig.ServerName, want.TLSConfig.ServerName)
		}
	}
}
