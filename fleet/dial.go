package fleet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/outbound-go/outbound/config"
)

// go-redis v9 (v9.23.0) logs through one logger for the whole process
// (redis.SetLogger; no option per client), and its pool prints every
// failed dial there, to the standard error by default: with Redis down,
// a line per round trip and per resubscription, 9 to 25 a second per pod.
// Setting that logger would change the log of every other go-redis
// client of the service, so the fleet leaves it alone and keeps its own
// failed dials from the pool instead: its dialer turns one into a
// connection that fails on first use with the dial's error. The round
// trip fails with that error as before, the fleet reports it (Sync,
// Config.Logger), and go-redis has nothing to print.

// quietDial wraps go-redis's dialer: a failed dial is a refusedConn.
func quietDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return refusedConn{err: dialError{err}, addr: dialAddr{network, addr}}, nil
		}
		return c, nil
	}
}

// refusedConn is a dial that failed: every read and write returns its
// error.
type refusedConn struct {
	err  error
	addr net.Addr
}

func (c refusedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c refusedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c refusedConn) Close() error                     { return nil }
func (c refusedConn) LocalAddr() net.Addr              { return c.addr }
func (c refusedConn) RemoteAddr() net.Addr             { return c.addr }
func (c refusedConn) SetDeadline(time.Time) error      { return nil }
func (c refusedConn) SetReadDeadline(time.Time) error  { return nil }
func (c refusedConn) SetWriteDeadline(time.Time) error { return nil }

// dialError is the error of a refusedConn: go-redis unwraps the error of
// a connection it could not set up, and the fleet's report should still
// say "dial tcp <addr>: ...", not only "connect: connection refused".
type dialError struct{ err error }

func (e dialError) Error() string { return e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// dialAddr is the address a refusedConn was dialled to.
type dialAddr struct{ network, addr string }

func (a dialAddr) Network() string { return a.network }
func (a dialAddr) String() string  { return a.addr }

// newClient checks cfg's Redis URL and namespace and returns the fleet's
// Redis client: a *redis.ClusterClient when the URL names a Redis Cluster
// (config.Redis.Cluster), else a *redis.Client. The URL is read by
// config (config.Fleet.Redis), never by go-redis: the URL `outbound
// check` passes is the one dialled here, and one it refuses is refused
// here with the same reason.
func newClient(cfg *Config) (redis.UniversalClient, error) {
	if cfg.RedisURL == "" {
		return nil, errors.New("fleet: no Redis URL (" + config.FleetRedisURLVar + ")")
	}
	fc := config.Fleet{RedisURL: cfg.RedisURL, Namespace: cfg.Namespace}
	if err := fc.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	r, err := fc.Redis()
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if r.Cluster {
		return redis.NewClusterClient(clusterOptions(cfg, r)), nil
	}
	return redis.NewClient(clientOptions(cfg, r)), nil
}

// tlsConfig is the TLS of a rediss:// URL (nil for redis://), as
// go-redis's ParseURL sets it: the URL's host is the name the server's
// certificate must hold.
func tlsConfig(r config.Redis) *tls.Config {
	if !r.TLS {
		return nil
	}
	return &tls.Config{ServerName: r.Host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: r.SkipVerify}
}

// clientOptions returns the options of the fleet's client of a single
// Redis r.
func clientOptions(cfg *Config, r config.Redis) *redis.Options {
	opt := &redis.Options{Network: "tcp", Addr: r.Addrs[0], Username: r.Username, Password: r.Password, DB: r.DB, TLSConfig: tlsConfig(r)}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = cfg.Timeout, cfg.Timeout, cfg.Timeout
	opt.PoolTimeout = cfg.Timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1   // a failed round trip is retried by the next tick
	opt.DialerRetries = 1 // a refused dial is an answer
	opt.Dialer = quietDial(redis.NewDialer(opt))
	// The loop is the pool's one user, one round trip at a time, so the
	// pool never grows past a connection or two. Its size matters for
	// another reason: after PoolSize failed dials go-redis stops dialling
	// and probes once a second in a goroutine of its own, which would
	// delay a resync by up to a second and outlive Close by as much. The
	// pool sees no failed dial (quietDial), and a large size keeps that
	// gate shut even so: each tick dials, and a Redis that is back is
	// seen on the next tick.
	opt.PoolSize = poolSize
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opt
}

// poolSize is the size of the pool of each Redis the fleet talks to (see
// clientOptions).
const poolSize = 1 << 16

// clusterOptions returns the options of the fleet's client of a Redis
// Cluster r, set as clientOptions sets a single Redis's, for each node. A
// MOVED or ASK reply (a slot that moved) is followed at most twice within
// the round trip; the node map is read again at once.
func clusterOptions(cfg *Config, r config.Redis) *redis.ClusterOptions {
	opt := &redis.ClusterOptions{Addrs: r.Addrs, Username: r.Username, Password: r.Password, TLSConfig: tlsConfig(r)}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = cfg.Timeout, cfg.Timeout, cfg.Timeout
	opt.PoolTimeout = cfg.Timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.MaxRedirects = 2
	opt.DialerRetries = 1
	opt.Dialer = quietDial(redis.NewDialer(&redis.Options{DialTimeout: cfg.Timeout, TLSConfig: opt.TLSConfig}))
	opt.PoolSize = poolSize
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opt
}

// channelOf is the channel of the fleet of namespace ns.
func channelOf(ns string) string { return "outbound:fleet:" + ns }

// keyBase is the prefix of every key of system in namespace ns:
// outbound:fleet:{<ns>:<system>}. The braces are a hash tag: Redis
// Cluster puts every key of one system in one slot, so that a script may
// touch them all.
func keyBase(ns, system string) string { return "outbound:fleet:{" + ns + ":" + system + "}" }
