// Command adaptive compares outbound's adaptive bulkhead with
// a fixed one and with failsafe-go's adaptivelimiter, on a loopback
// upstream with a real capacity: W workers serve one request each for S,
// the rest queue in arrival order.
//
//	cd bench && go run ./adaptive [-d 5s] [-csv limits.csv]
//
// Every contender is driven by 64 closed-loop callers. A call refused by
// the limiter (bulkhead.ErrFull, adaptivelimiter.ErrExceeded) waits 5ms
// before its caller tries again. Both adaptive limiters run between 1
// and 64 and start at 64 (failsafe-initial20: at 20, failsafe-go's
// default); failsafe-go keeps its other defaults, and its permit is
// recorded when the response headers arrive, where outbound measures
// too. Two scenarios: "steady" (8 workers x 10ms, 800 calls/s;
// latency of the calls of the second half, once the limits have settled)
// and "follow" (8 workers, then 32, then 4, a third of the run each;
// latency of all calls).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

const (
	callers = 64
	service = 10 * time.Millisecond
	backoff = 5 * time.Millisecond
)

func main() {
	d := flag.Duration("d", 5*time.Second, "duration of each run")
	csvPath := flag.String("csv", "", "write the limit every 100ms of every run to this CSV file")
	flag.Parse()
	var csv strings.Builder
	csv.WriteString("scenario,contender,t_s,limit\n")
	fmt.Printf("64 callers, upstream workers x %v; each run %v\n\n", service, *d)
	for _, sc := range []string{"steady", "follow"} {
		fmt.Printf("%s:\n%-18s %8s %6s %9s %9s %10s  %s\n", sc, "contender", "ok/s", "cap%", "p50", "p99", "refused/s", "limit")
		for _, name := range []string{"outbound-fixed", "outbound-adaptive", "failsafe-adaptive", "failsafe-initial20"} {
			if sc == "follow" && name == "outbound-fixed" {
				continue
			}
			r, err := run(sc, name, *d)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Printf("%-19s %8.0f %5.0f%% %9v %9v %10.0f  %s\n", name, r.okPerSec(), 100*r.okPerSec()/r.capacity,
				r.pct(0.5).Round(100*time.Microsecond), r.pct(0.99).Round(100*time.Microsecond), float64(r.refused)/r.d.Seconds(), r.limitSummary(sc))
			for i, l := range r.limits {
				fmt.Fprintf(&csv, "%s,%s,%.1f,%d\n", sc, name, float64(i+1)/10, l)
			}
		}
		fmt.Println()
	}
	if *csvPath != "" {
		if err := os.WriteFile(*csvPath, []byte(csv.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// result is one run's figures.
type result struct {
	d        time.Duration
	capacity float64 // calls/s the upstream can serve, averaged over the run
	ok       int64
	refused  int64
	lat      []time.Duration
	limits   []int64
}

func (r *result) okPerSec() float64 { return float64(r.ok) / r.d.Seconds() }

func (r *result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
}

// limitSummary is the limit's range over the second half of a steady
// run, or how long it took to follow each change of a follow run.
func (r *result) limitSummary(sc string) string {
	n := len(r.limits)
	if n == 0 {
		return "-"
	}
	if sc == "steady" {
		tail := r.limits[n/2:]
		return fmt.Sprintf("%d..%d (second half)", slices.Min(tail), slices.Max(tail))
	}
	third := n / 3
	reach := func(from int, ok func(int64) bool) string {
		for i := from; i < n && i < from+third; i++ {
			if ok(r.limits[i]) {
				return fmt.Sprintf("%.1fs", float64(i-from+1)/10)
			}
		}
		return "never"
	}
	return fmt.Sprintf("at %d then >=32 in %s; at %d then <=10 in %s", r.limits[third-1],
		reach(third, func(l int64) bool { return l >= 32 }), r.limits[2*third-1],
		reach(2*third, func(l int64) bool { return l <= 10 }))
}

// contender is a client under test: call sends one GET and says whether
// the limiter refused it; limit reports its current limit.
type contender struct {
	call  func() (refused bool, err error)
	limit func() int64
	close func()
}

func build(name, url string) (contender, error) {
	switch name {
	case "outbound-fixed", "outbound-adaptive":
		loaded, err := config.LoadEnv(map[string]string{
			"OUTBOUND_SYSTEMS":         "up",
			"UP_BASE_URL":              url,
			"UP_MAX_CONCURRENT":        "64",
			"UP_RETRIES":               "0",
			"UP_ADAPTIVE_CONCURRENCY":  fmt.Sprint(name == "outbound-adaptive"),
			"UP_BREAKER_MIN_REQUESTS":  "100000",
			"UP_RETRY_BUDGET_RATIO":    "1",
			"UP_BREAKER_FAILURE_RATIO": "1",
		})
		if err != nil {
			return contender{}, err
		}
		reg, err := registry.New(loaded)
		if err != nil {
			return contender{}, err
		}
		c := reg.MustClient("up")
		return contender{
			call: func() (bool, error) {
				req, _ := http.NewRequest(http.MethodGet, "/", nil)
				resp, err := c.Do(req)
				if errors.Is(err, bulkhead.ErrFull) {
					return true, nil
				}
				if err != nil {
					return false, err
				}
				return false, consume(resp)
			},
			limit: func() int64 { return c.Status().Limit },
			close: func() { _ = reg.Close() },
		}, nil
	case "failsafe-adaptive", "failsafe-initial20":
		initial := uint(64)
		if name == "failsafe-initial20" {
			initial = 20 // failsafe-go's default initial limit
		}
		lim := adaptivelimiter.NewBuilder[*http.Response]().WithLimits(1, 64, initial).Build()
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost, t.MaxConnsPerHost = 64, 64
		hc := &http.Client{Transport: t, Timeout: 15 * time.Second}
		return contender{
			call: func() (bool, error) {
				p, ok := lim.TryAcquirePermit()
				if !ok {
					return true, nil
				}
				resp, err := hc.Get(url + "/")
				if err != nil {
					p.Drop()
					return false, err
				}
				p.Record()
				return false, consume(resp)
			},
			limit: func() int64 { return int64(lim.Limit()) },
			close: t.CloseIdleConnections,
		}, nil
	}
	return contender{}, fmt.Errorf("unknown contender %q", name)
}

func consume(resp *http.Response) error {
	_, err := io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

// run drives one contender in one scenario for d.
func run(sc, name string, d time.Duration) (*result, error) {
	up := &upstream{workers: 8}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := httptest.NewUnstartedServer(up)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	c, err := build(name, srv.URL)
	if err != nil {
		return nil, err
	}
	defer c.close()

	res := &result{d: d, capacity: 8 / service.Seconds()}
	if sc == "follow" {
		res.capacity = (8 + 32 + 4) / 3 / service.Seconds()
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error]
	)
	for range callers {
		wg.Go(func() {
			var lat []time.Duration
			var ok, refused int64
			for ctx.Err() == nil {
				t0 := time.Now()
				ref, err := c.call()
				switch {
				case err != nil:
					firstErr.CompareAndSwap(nil, &err)
					return
				case ref:
					refused++
					time.Sleep(backoff)
				default:
					ok++
					if sc == "follow" || t0.Sub(start) >= d/2 {
						lat = append(lat, time.Since(t0))
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.ok, res.refused = res.ok+ok, res.refused+refused
			res.lat = append(res.lat, lat...)
		})
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 1; ctx.Err() == nil; i++ {
		select {
		case <-ctx.Done():
		case <-tick.C:
			res.limits = append(res.limits, c.limit())
			if sc == "follow" {
				switch time.Duration(i) * 100 * time.Millisecond {
				case d / 3:
					up.resize(32)
				case 2 * d / 3:
					up.resize(4)
				}
			}
		}
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return nil, fmt.Errorf("%s %s: %w", sc, name, *p)
	}
	return res, nil
}

// upstream serves each request with one of its workers for service;
// the others queue in arrival order.
type upstream struct {
	mu      sync.Mutex
	workers int
	busy    int
	queue   []chan struct{}
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	if u.busy < u.workers {
		u.busy++
		u.mu.Unlock()
	} else {
		ch := make(chan struct{})
		u.queue = append(u.queue, ch)
		u.mu.Unlock()
		<-ch // the bench never cancels a call
	}
	time.Sleep(service)
	u.mu.Lock()
	if u.busy <= u.workers && len(u.queue) > 0 {
		close(u.queue[0])
		u.queue = u.queue[1:]
	} else {
		u.busy--
	}
	u.mu.Unlock()
	w.Header().Set("Content-Length", "2")
	_, _ = io.WriteString(w, "ok")
}

func (u *upstream) resize(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.workers = n
	for u.busy < u.workers && len(u.queue) > 0 {
		u.busy++
		close(u.queue[0])
		u.queue = u.queue[1:]
	}
}
