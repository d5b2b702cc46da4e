package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afex/hystrix-go/hystrix"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/sync/semaphore"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// client is one contender: setup builds a fresh client for a round and
// returns its call (one GET, body read and closed) and its cleanup.
type client struct {
	name  string
	setup func(url string, inflight int) (call func() error, cleanup func(), err error)
}

var allClients = []client{
	{"raw", setupRaw},
	{"hand-rolled", setupHandRolled},
	{"outbound", setupOutbound},
	{"outbound-omit", setupOutboundOmit},
	{"outbound-routes", setupOutboundRoutes},
	{"retryablehttp", setupRetryable},
	{"failsafe-go", setupFailsafe},
	{"hystrix-go", setupHystrix},
}

// transport is the tuned transport every client uses, as the registry
// builds it for a system (registry/transport.go).
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}
	t.DialContext = d.DialContext
	t.TLSHandshakeTimeout = tlsTimeout
	t.ResponseHeaderTimeout = readTimeout
	t.IdleConnTimeout = idleTimeout
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = poolSize
	t.MaxConnsPerHost = poolSize
	t.ForceAttemptHTTP2 = true
	return t
}

// consume reads resp's body to the end, closes it and checks the answer.
func consume(resp *http.Response) error {
	n, err := io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && (resp.StatusCode != http.StatusOK || n != int64(len(body))) {
		err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return err
}

// getWith sends one GET of url through do and consumes the response.
func getWith(do func(*http.Request) (*http.Response, error), url string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := do(req)
	if err != nil {
		return err
	}
	return consume(resp)
}

func get(c *http.Client, url string) error { return getWith(c.Do, url) }

// setupRaw: net/http with the tuned transport and Timeout = CALL_TIMEOUT;
// no retry, no breaker, no bulkhead.
func setupRaw(url string, _ int) (func() error, func(), error) {
	t := transport()
	c := &http.Client{Transport: t, Timeout: callTimeout}
	return func() error { return get(c, url) }, t.CloseIdleConnections, nil
}

// setupOutbound: a registry of one system with the baseline settings
// (retries 2, breaker, retry budget, CALL_TIMEOUT 15s, X-Time-Budget sent)
// and MAX_CONCURRENT 64 (or the number in flight if larger).
func setupOutbound(url string, inflight int) (func() error, func(), error) {
	return setupOutboundWith(url, inflight, false)
}

// setupOutboundOmit: setupOutbound with OMIT_TIME_BUDGET=true, as for a
// third party: no X-Time-Budget header per attempt.
func setupOutboundOmit(url string, inflight int) (func() error, func(), error) {
	return setupOutboundWith(url, inflight, true)
}

func setupOutboundWith(url string, inflight int, omit bool) (func() error, func(), error) {
	r, err := benchRegistry(map[string]string{
		"BENCH_BASE_URL":         url,
		"BENCH_MAX_CONCURRENT":   strconv.Itoa(max(poolSize, inflight)),
		"BENCH_OMIT_TIME_BUDGET": strconv.FormatBool(omit),
	})
	if err != nil {
		return nil, nil, err
	}
	call, stop := registryCall(r, url)
	return call, stop, nil
}

// setupOutboundRoutes: setupOutbound with ten routes declared, none of
// which the bench's request matches: every call is matched against all
// ten and runs on the system's settings, the most a match costs.
func setupOutboundRoutes(url string, inflight int) (func() error, func(), error) {
	env := map[string]string{
		"BENCH_BASE_URL":       url,
		"BENCH_MAX_CONCURRENT": strconv.Itoa(max(poolSize, inflight)),
	}
	var names []string
	for i := range 10 {
		name := fmt.Sprintf("op%d", i)
		names = append(names, name)
		env[fmt.Sprintf("BENCH_ROUTE_OP%d_MATCH", i)] = fmt.Sprintf("GET /v1/op%d/{id}", i)
	}
	env["BENCH_ROUTES"] = strings.Join(names, ",")
	r, err := benchRegistry(env)
	if err != nil {
		return nil, nil, err
	}
	call, stop := registryCall(r, url)
	return call, stop, nil
}

// benchRegistry is a registry of the one system "bench", configured by
// env (its variables, OUTBOUND_SYSTEMS aside) and the baseline.
func benchRegistry(env map[string]string) (*registry.Registry, error) {
	env[config.SystemsVar] = "bench"
	loaded, err := config.LoadEnv(env)
	if err != nil {
		return nil, err
	}
	return registry.New(loaded)
}

// registryCall returns a GET of url through r's "bench" client, and the
// function that closes r.
func registryCall(r *registry.Registry, url string) (func() error, func()) {
	c := r.MustClient("bench")
	return func() error { return getWith(c.Do, url) }, func() { _ = r.Close() }
}

// errHandRolledFull is the hand-rolled reference's refusal when its
// semaphore has no permit left.
var errHandRolledFull = errors.New("hand-rolled: bulkhead full")

// errTemporary marks a temporary status inside the hand-rolled breaker.
var errTemporary = errors.New("temporary status")

// handRolled is the reference: what a careful engineer writes
// by hand from the same parts as the registry: an x/sync semaphore of 64
// (TryAcquire; the permit held until the body is closed), a gobreaker/v2
// breaker per attempt (the registry's counting: 408, 429 and 5xx are
// failures) and a retry loop (2 retries of temporary statuses and
// transport errors, backoff 100ms..2s with full jitter), the tuned
// transport and Timeout = CALL_TIMEOUT. It has no deadline cap from the
// caller's budget, no permit timer for a forgotten body, no X-Time-Budget
// and no observers: the registry's extra work is measured against it.
type handRolled struct {
	c   *http.Client
	sem *semaphore.Weighted
	cb  *gobreaker.CircuitBreaker[*http.Response]
}

func newHandRolled(t http.RoundTripper, permits int) *handRolled {
	return &handRolled{
		c:   &http.Client{Transport: t, Timeout: callTimeout},
		sem: semaphore.NewWeighted(int64(permits)),
		cb: gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
			Name: "hand-rolled", Interval: 30 * time.Second, Timeout: 15 * time.Second,
			ReadyToTrip: func(n gobreaker.Counts) bool {
				return n.Requests >= 20 && float64(n.TotalFailures) >= 0.5*float64(n.Requests)
			},
		}),
	}
}

func temporary(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// Do sends req as the reference does; the permit goes back when the
// response's body is closed.
func (h *handRolled) Do(req *http.Request) (*http.Response, error) {
	if !h.sem.TryAcquire(1) {
		return nil, errHandRolledFull
	}
	var resp *http.Response
	var err error
	for n := 0; ; n++ {
		resp, err = h.cb.Execute(func() (*http.Response, error) {
			resp, err := h.c.Do(req)
			if err == nil && temporary(resp.StatusCode) {
				return resp, errTemporary
			}
			return resp, err
		})
		if err == errTemporary && n == retries {
			err = nil // retries ran out: the caller gets the response
		}
		if err == nil || n == retries || errors.Is(err, gobreaker.ErrOpenState) {
			break
		}
		if resp != nil {
			_, _ = io.CopyN(io.Discard, resp.Body, 256<<10)
			_ = resp.Body.Close()
		}
		time.Sleep(time.Duration(rand.Int64N(int64(min(backoffMax, backoffBase<<n)) + 1)))
	}
	if err != nil {
		h.sem.Release(1)
		return nil, err
	}
	resp.Body = &releaseBody{ReadCloser: resp.Body, sem: h.sem}
	return resp, nil
}

// setupHandRolled: the hand-rolled reference with a semaphore of 64 (or
// the number in flight if larger).
func setupHandRolled(url string, inflight int) (func() error, func(), error) {
	t := transport()
	h := newHandRolled(t, max(poolSize, inflight))
	return func() error { return getWith(h.Do, url) }, t.CloseIdleConnections, nil
}

// releaseBody gives the hand-rolled reference's permit back on Close.
type releaseBody struct {
	io.ReadCloser
	sem  *semaphore.Weighted
	once sync.Once
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.sem.Release(1) })
	return err
}

// setupRetryable: go-retryablehttp with 2 retries, backoff 100ms..2s, the
// tuned transport and Timeout = CALL_TIMEOUT; no breaker, no bulkhead.
func setupRetryable(url string, _ int) (func() error, func(), error) {
	t := transport()
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: t, Timeout: callTimeout}
	c.RetryMax = retries
	c.RetryWaitMin = backoffBase
	c.RetryWaitMax = backoffMax
	c.Logger = nil
	call := func() error {
		req, err := retryablehttp.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		return consume(resp)
	}
	return call, t.CloseIdleConnections, nil
}

// setupFailsafe: failsafe-go's failsafehttp round tripper with a bulkhead
// of 64 (outermost), failsafehttp's retry policy (2 retries, backoff
// 100ms..2s) and a circuit breaker per attempt (50% failures over at least
// 20 attempts in 30s, open 15s), the tuned transport, Timeout =
// CALL_TIMEOUT.
func setupFailsafe(url string, inflight int) (func() error, func(), error) {
	t := transport()
	bh := bulkhead.NewBuilder[*http.Response](uint(max(poolSize, inflight))).Build()
	rp := failsafehttp.NewRetryPolicyBuilder().
		WithMaxRetries(retries).
		WithBackoff(backoffBase, backoffMax).
		Build()
	cb := circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(func(resp *http.Response, err error) bool {
			return err != nil || temporary(resp.StatusCode)
		}).
		WithFailureRateThreshold(0.5, 20, 30*time.Second).
		WithDelay(15 * time.Second).
		Build()
	c := &http.Client{Transport: failsafehttp.NewRoundTripper(t, bh, rp, cb), Timeout: callTimeout}
	return func() error { return get(c, url) }, t.CloseIdleConnections, nil
}

var hystrixSeq atomic.Int64

// hystrixMaxConcurrent is hystrix-go's MaxConcurrentRequests. hystrix-go
// hands its tickets back on a goroutine of its own after Do has returned,
// so with 64 it rejects calls (hystrix: max concurrency) even at 1 in
// flight; it gets headroom instead, and the comparison stays one of
// overhead, not of rejections.
const hystrixMaxConcurrent = 1024

// setupHystrix: hystrix-go's Do around a raw call (body read inside),
// with hystrixMaxConcurrent tickets, a 15s timeout and its breaker (50%
// errors over at least 20 requests, sleep 15s); hystrix has no retry.
func setupHystrix(url string, inflight int) (func() error, func(), error) {
	t := transport()
	c := &http.Client{Transport: t, Timeout: callTimeout}
	name := fmt.Sprintf("bench-%d", hystrixSeq.Add(1)) // a fresh circuit per round
	hystrix.ConfigureCommand(name, hystrix.CommandConfig{
		Timeout:                int(callTimeout / time.Millisecond),
		MaxConcurrentRequests:  max(hystrixMaxConcurrent, inflight),
		RequestVolumeThreshold: 20,
		SleepWindow:            int(15 * time.Second / time.Millisecond),
		ErrorPercentThreshold:  50,
	})
	call := func() error {
		return hystrix.Do(name, func() error { return get(c, url) }, nil)
	}
	return call, t.CloseIdleConnections, nil
}
