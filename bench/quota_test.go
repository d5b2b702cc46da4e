package main

// The cost of the rate limit on the hot path (RATE_LIMIT), in-process:
//
//	cd bench && go test -run '^$' -bench Quota -benchmem
//
// BenchmarkQuotaCall: one call through the whole registry pipeline on an
// in-memory transport, the quota off (the stage is not in the chain),
// local (a token bucket) and fleet (the pod's share of the fleet's quota,
// granted by the fleet's loop over a real redis-server: no Redis command
// per request). The limit is far above the rate reached: this is the
// cost of taking a token, not of waiting for one.
//
// BenchmarkQuotaCallers: 16 callers, the same three, and a quota that
// runs one Redis script per request: the GCRA script of
// go-redis/redis_rate (its allow script, one EVALSHA per request), written
// out here as that module is not served to this project. Interleaved
// rounds of 1s (the machine's drift falls on all four alike); it reports
// the median requests per second and p99 of each (ns/op and allocs/op
// are of the whole run, not per call).

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/registry"
)

// quotaClient is the payments client of a registry whose quota is mode:
// off, local or fleet (a fleet over srv), or per-request (off in the
// registry, and a GCRA script on srv before every request, in the
// transport).
func quotaClient(b *testing.B, srv *redistest.Server, mode string) *registry.Client {
	b.Helper()
	env := map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": "http://payments.invalid",
		"PAYMENTS_MAX_CONCURRENT": "64", "PAYMENTS_OMIT_TIME_BUDGET": "true",
		"OUTBOUND_FLEET_REDIS_URL": srv.URL(), "OUTBOUND_FLEET_NAMESPACE": "bench-" + mode,
	}
	if mode == "local" || mode == "fleet" {
		env["PAYMENTS_RATE_LIMIT"], env["PAYMENTS_RATE_SCOPE"] = "1000000000/s", mode
	}
	var rt http.RoundTripper = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	if mode == "per-request" {
		rt = perRequest(b, srv, rt)
	}
	opts := []registry.Option{registry.WithTransportWrapper(func(string, http.RoundTripper) http.RoundTripper { return rt })}
	if mode == "fleet" {
		f, err := fleet.New(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: "bench-fleet"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		opts = append(opts, f.Option())
	}
	loaded, err := config.LoadEnv(env)
	if err != nil {
		b.Fatal(err)
	}
	reg, err := registry.New(loaded, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { reg.Close() })
	return reg.MustClient("payments")
}

// gcra is go-redis/redis_rate's allow script (GCRA, one key per limit):
// KEYS[1] the key; ARGV burst, rate, period (s), cost. It returns
// {allowed, remaining, retry after, reset after}.
var gcra = redis.NewScript(`
redis.replicate_commands()
local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])
local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)
local tat = redis.call("GET", rate_limit_key)
if not tat then
  tat = now
else
  tat = tonumber(tat)
end
tat = math.max(tat, now)
local new_tat = tat + increment
local allow_at = new_tat - burst_offset
local diff = now - allow_at
local remaining = diff / emission_interval
if remaining < 0 then
  local reset_after = tat - now
  local retry_after = diff * -1
  return {0, 0, tostring(retry_after), tostring(reset_after)}
end
local reset_after = new_tat - now
if reset_after > 0 then
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
end
local retry_after = -1
return {cost, remaining, tostring(retry_after), tostring(reset_after)}
`)

// perRequest runs the GCRA script before every request next sends, as a
// quota with one Redis round trip per request does.
func perRequest(b *testing.B, srv *redistest.Server, next http.RoundTripper) http.RoundTripper {
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	b.Cleanup(func() { rdb.Close() })
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		res, err := gcra.Run(r.Context(), rdb, []string{"rate:payments"}, 100000, 1000000000, 1, 1).Slice()
		if err != nil {
			return nil, err
		}
		if n, _ := res[0].(int64); n == 0 {
			return nil, fmt.Errorf("rate limited")
		}
		return next.RoundTrip(r)
	})
}

// BenchmarkQuotaCall: the registry's hot path with the quota off, local
// and fleet.
func BenchmarkQuotaCall(b *testing.B) {
	srv := redistest.Start(b)
	for _, mode := range []string{"off", "local", "fleet"} {
		b.Run(mode, func(b *testing.B) {
			c := quotaClient(b, srv, mode)
			req, _ := http.NewRequest(http.MethodGet, "/pay", nil)
			b.ReportAllocs()
			for b.Loop() {
				if err := call(c, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuotaCallers: 16 callers, the quota off, local, fleet, and
// one Redis script per request, in interleaved rounds of 1s each: the
// median of the rounds' requests per second and p99, per mode.
func BenchmarkQuotaCallers(b *testing.B) {
	srv := redistest.Start(b)
	const callers, run, rounds = 16, time.Second, 3
	modes := []string{"off", "local", "fleet", "per-request"}
	clients := map[string]*registry.Client{}
	for _, m := range modes {
		clients[m] = quotaClient(b, srv, m)
	}
	rps, p99 := map[string][]float64{}, map[string][]float64{}
	for b.Loop() {
		for range rounds {
			for _, m := range modes {
				n, p := callersRound(b, clients[m], callers, run)
				rps[m], p99[m] = append(rps[m], n), append(p99[m], p)
			}
		}
	}
	for _, m := range modes {
		b.ReportMetric(median(rps[m]), m+"-req/s")
		b.ReportMetric(median(p99[m]), m+"-p99-us")
	}
}

// callersRound runs callers on c for d: requests per second, and the p99
// of one call in microseconds.
func callersRound(b *testing.B, c *registry.Client, callers int, d time.Duration) (float64, float64) {
	lat := make([][]time.Duration, callers)
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "/pay", nil)
			for time.Now().Before(end) {
				start := time.Now()
				if err := call(c, req); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(start))
			}
		})
	}
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	return float64(len(all)) / d.Seconds(), float64(all[len(all)*99/100].Microseconds())
}
