package checkcmd

import (
	"context"
	"net"
	"net/url"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/redact"
)

// fleetDialTimeout bounds the check's look at the fleet's Redis.
const fleetDialTimeout = time.Second

// fleetWarnings warns when env's OUTBOUND_FLEET_REDIS_URL is valid but
// nothing answers at its address: not a configuration problem (pods start
// and run their breakers and quotas local until Redis answers), but worth
// knowing before a rollout. It only opens a TCP connection: the check
// speaks no Redis, so that the core stays Redis-free.
func fleetWarnings(ctx context.Context, env map[string]string) []config.Problem {
	f, err := config.LoadFleetEnv(env)
	if err != nil || f.RedisURL == "" {
		return nil // a problem the load reports, or no fleet
	}
	u, err := url.Parse(f.RedisURL)
	if err != nil {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	dctx, cancel := context.WithTimeout(ctx, fleetDialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err == nil {
		c.Close()
		return nil
	}
	return []config.Problem{{Var: config.FleetRedisURLVar, Value: redact.RedisURL(f.RedisURL), Source: config.FromEnv,
		Rule: "nothing answers at " + redact.Show(net.JoinHostPort(u.Hostname(), port)) +
			": pods will start and run every breaker local until Redis answers"}}
}
