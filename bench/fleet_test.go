package main

// The cost of fleet sync on the hot path, against the
// same registry at scope local and against gobreaker's
// DistributedCircuitBreaker on the same redis-server:
//
//	cd bench && go test -run '^$' -bench Fleet -benchmem
//
// BenchmarkFleetCall: one call through the whole registry pipeline on an
// in-memory transport (no socket), sync off (local) vs on (fleet).
// BenchmarkFleetNoop: one call that does nothing: a whole registry call
// at scope fleet (in-memory transport), and gobreaker's distributed
// breaker alone around a no-op. BenchmarkFleetUpstream: 16
// callers and a 5ms upstream (a sleep): calls/s.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/registry"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// benchClient is the payments client of a registry at scope, its
// transport in memory (200, empty body) or delayed by upstream.
func benchClient(b *testing.B, srv *redistest.Server, scope string, upstream time.Duration) *registry.Client {
	b.Helper()
	env := map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": "http://payments.invalid",
		"PAYMENTS_BREAKER_SCOPE": scope, "PAYMENTS_MAX_CONCURRENT": "64", "PAYMENTS_OMIT_TIME_BUDGET": "true",
		"OUTBOUND_FLEET_REDIS_URL": srv.URL(), "OUTBOUND_FLEET_NAMESPACE": "bench",
	}
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if upstream > 0 {
			time.Sleep(upstream)
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	opts := []registry.Option{registry.WithTransportWrapper(func(string, http.RoundTripper) http.RoundTripper { return rt })}
	if scope == "fleet" {
		f, err := fleet.New(context.Background(), fleet.Config{RedisURL: srv.URL(), Namespace: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		opts = append(opts, f.Option())
		b.Cleanup(func() {
			// A round trip starved of CPU by the benchmark's own loop
			// can pass its 100ms timeout: the pod then runs local for a
			// moment, which is the design, so it is reported, not failed.
			if s := f.Sync(); !s.Synced {
				b.Logf("fleet degraded at the end (CPU-starved round trip): %s", s.LastError)
			}
		})
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
	c := reg.MustClient("payments")
	for deadline := time.Now().Add(2 * time.Second); scope == "fleet" && time.Now().Before(deadline); {
		if st := c.Status(); st.Fleet != nil && st.Fleet.Synced {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return c
}

func call(c *registry.Client, req *http.Request) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// BenchmarkFleetCall: the registry's hot path, sync off and on.
func BenchmarkFleetCall(b *testing.B) {
	srv := redistest.Start(b)
	for _, scope := range []string{"local", "fleet"} {
		b.Run(scope, func(b *testing.B) {
			c := benchClient(b, srv, scope, 0)
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

// redisStore is gobreaker's SharedDataStore on go-redis, as gobreaker's
// v2/redis module builds it: a lock taken with SET NX PX, the state as
// one JSON value.
type redisStore struct{ rdb *redis.Client }

func (s redisStore) Lock(name string) error {
	ok, err := s.rdb.SetNX(context.Background(), name, "1", 5*time.Second).Result()
	if err == nil && !ok {
		err = errors.New("locked")
	}
	return err
}

func (s redisStore) Unlock(name string) error {
	return s.rdb.Del(context.Background(), name).Err()
}

func (s redisStore) GetData(name string) ([]byte, error) {
	b, err := s.rdb.Get(context.Background(), name).Bytes()
	if err == redis.Nil {
		return nil, nil
	}
	return b, err
}

func (s redisStore) SetData(name string, data []byte) error {
	return s.rdb.Set(context.Background(), name, data, 0).Err()
}

func distributed(b *testing.B, srv *redistest.Server) *gobreaker.DistributedCircuitBreaker[*http.Response] {
	b.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32})
	b.Cleanup(func() { rdb.Close() })
	dcb, err := gobreaker.NewDistributedCircuitBreaker[*http.Response](redisStore{rdb}, gobreaker.Settings{
		Name: "payments", MaxRequests: 3, Interval: 30 * time.Second, Timeout: 15 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	return dcb
}

// BenchmarkFleetNoop: a whole registry call at scope fleet against
// gobreaker's distributed breaker alone, each around nothing.
func BenchmarkFleetNoop(b *testing.B) {
	srv := redistest.Start(b)
	noop := func() (*http.Response, error) { return nil, nil }
	b.Run("outbound-fleet", func(b *testing.B) {
		c := benchClient(b, srv, "fleet", 0)
		req, _ := http.NewRequest(http.MethodGet, "/pay", nil)
		b.ReportAllocs()
		for b.Loop() {
			if err := call(c, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gobreaker-distributed", func(b *testing.B) {
		dcb := distributed(b, srv)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := dcb.Execute(noop); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFleetUpstream: 16 callers, a 5ms upstream, for 3s: calls/s
// (ns/op and allocs/op are of the whole run, not per call).
func BenchmarkFleetUpstream(b *testing.B) {
	srv := redistest.Start(b)
	const callers, upstream = 16, 5 * time.Millisecond
	// run reports the calls that succeeded per second and the share that
	// failed (gobreaker's distributed breaker gives up waiting for its
	// fleet-wide lock).
	run := func(b *testing.B, one func() error) {
		var ok, failed atomic.Int64
		start := time.Now()
		end := start.Add(3 * time.Second) // a fixed time: b.N does not apply
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for time.Now().Before(end) {
					if one() != nil {
						failed.Add(1)
					} else {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(ok.Load())/time.Since(start).Seconds(), "calls/s")
		b.ReportMetric(100*float64(failed.Load())/float64(max(1, ok.Load()+failed.Load())), "%failed")
	}
	b.Run("outbound-fleet", func(b *testing.B) {
		c := benchClient(b, srv, "fleet", upstream)
		run(b, func() error {
			req, _ := http.NewRequest(http.MethodGet, "/pay", nil)
			return call(c, req)
		})
	})
	b.Run("gobreaker-distributed", func(b *testing.B) {
		dcb := distributed(b, srv)
		run(b, func() error {
			_, err := dcb.Execute(func() (*http.Response, error) { time.Sleep(upstream); return nil, nil })
			return err
		})
	})
}
