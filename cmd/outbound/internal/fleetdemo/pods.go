package fleetdemo

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

const (
	// namespace is the prefix of the demo's keys on its own Redis.
	namespace = "demo"
	// callBound bounds every call of a pod, as a request handler's
	// deadline would.
	callBound = 3 * time.Second
	// callersPerPod is how many goroutines of each pod call the fake.
	callersPerPod = 2
	// The pause between two calls of one caller: 10-30ms.
	pauseMin, pauseSpread = 10 * time.Millisecond, 20 * time.Millisecond
)

// fleetEnv is the environment of every pod: payments on the fake, no
// retries, its breaker at scope fleet on the demo's Redis, tuned to trip
// within a storm and probe once for the whole fleet.
func fleetEnv(upstreamURL, redisAddr string) map[string]string {
	return map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": upstreamURL, "PAYMENTS_RETRIES": "0",
		"PAYMENTS_BREAKER_SCOPE": "fleet", "PAYMENTS_BREAKER_MIN_REQUESTS": "10",
		"PAYMENTS_BREAKER_WINDOW": "1s", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "2s", "PAYMENTS_BREAKER_HALF_OPEN_PROBES": "1",
		"OUTBOUND_FLEET_REDIS_URL": "redis://" + redisAddr, "OUTBOUND_FLEET_NAMESPACE": namespace,
	}
}

// pod is one registry of the service, with its own fleet sync loop.
type pod struct {
	fleet  *fleet.Fleet
	reg    *registry.Registry
	client *registry.Client // its payments client
	rec    *statuspage.Recorder
	paid   atomic.Int64 // calls answered 2xx
}

// pods are the service's pods.
type pods []*pod

// startPods builds numPods registries from env, each syncing its
// breakers over the fleet's Redis.
func startPods(ctx context.Context, env map[string]string) (pods, error) {
	loaded, err := config.LoadEnv(env)
	if err != nil {
		return nil, err
	}
	var ps pods
	for range numPods {
		p, err := startPod(ctx, loaded, env["OUTBOUND_FLEET_REDIS_URL"])
		if err != nil {
			ps.close()
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func startPod(ctx context.Context, loaded []config.Loaded, redisURL string) (*pod, error) {
	f, err := fleet.New(ctx, fleet.Config{RedisURL: redisURL, Namespace: namespace})
	if err != nil {
		return nil, err
	}
	rec := statuspage.NewRecorder()
	reg, err := registry.New(loaded, f.Option(), registry.WithObserver(rec))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &pod{fleet: f, reg: reg, client: reg.MustClient("payments"), rec: rec}, nil
}

// close closes every pod's registry, then its fleet.
func (ps pods) close() {
	for _, p := range ps {
		p.reg.Close()
		p.fleet.Close()
	}
}

// statusPages serves the status page of pod i at /pod-i/.
func (ps pods) statusPages() http.Handler {
	mux := http.NewServeMux()
	for i, p := range ps {
		prefix := "/pod-" + strconv.Itoa(i+1)
		mux.Handle(prefix+"/", http.StripPrefix(prefix, statuspage.Handler(p.reg, p.rec)))
	}
	return mux
}

// pay starts the callers of every pod; they stop when ctx ends, and the
// returned group waits for them.
func (ps pods) pay(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, p := range ps {
		for range callersPerPod {
			wg.Go(func() { p.payUntil(ctx) })
		}
	}
	return &wg
}

// payUntil calls the fake, with a short pause between calls, until ctx
// ends.
func (p *pod) payUntil(ctx context.Context) {
	pause := time.NewTimer(0)
	defer pause.Stop()
	for ctx.Err() == nil {
		p.payOnce(ctx)
		pause.Reset(pauseMin + rand.N(pauseSpread))
		select {
		case <-ctx.Done():
		case <-pause.C:
		}
	}
}

// payOnce makes one call, counting it paid when answered 2xx.
func (p *pod) payOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, callBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/pay", nil)
	if err != nil {
		return // a constant request: never
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 300 {
		p.paid.Add(1)
	}
}
