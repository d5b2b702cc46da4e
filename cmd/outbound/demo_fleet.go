package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// fleetPods is how many registries stand for the pods of one service.
const fleetPods = 3

// fleetStorm is the flaky fake's rhythm: healthy, then 503s, in turns.
const fleetStorm = 4 * time.Second

// runDemoFleet is `outbound demo --fleet`: three pods of one service call
// a flaky payments fake, their payments breakers shared over a
// redis-server of the demo's own (loopback, persistence off), and the
// demo shows them tripping together.
func runDemoFleet(ctx context.Context, duration time.Duration, statusAddr string, stdout, stderr io.Writer) int {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		fmt.Fprintln(stderr, "outbound demo --fleet: needs redis-server on the PATH, and starts its own on a free\n"+
			"loopback port with persistence off. Install it with: apt-get install redis-server\n"+
			"(Debian, Ubuntu), dnf install redis (Fedora), brew install redis (macOS).")
		return exitInvalid
	}
	rs, err := startRedis(bin)
	if err != nil {
		fmt.Fprintf(stderr, "outbound demo --fleet: %v\n", err)
		return exitInvalid
	}
	defer rs.stop()

	var hits atomic.Int64
	start := time.Now()
	failing := func() bool { return time.Since(start)/fleetStorm%2 == 1 }
	up, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if failing() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "paid")
	}))
	if err != nil {
		fmt.Fprintf(stderr, "outbound demo --fleet: %v\n", err)
		return exitInvalid
	}
	defer up.stop()

	env := map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.url, "PAYMENTS_RETRIES": "0",
		"PAYMENTS_BREAKER_SCOPE": "fleet", "PAYMENTS_BREAKER_MIN_REQUESTS": "10",
		"PAYMENTS_BREAKER_WINDOW": "1s", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "2s", "PAYMENTS_BREAKER_HALF_OPEN_PROBES": "1",
		"OUTBOUND_FLEET_REDIS_URL": "redis://" + rs.addr, "OUTBOUND_FLEET_NAMESPACE": "demo",
	}
	loaded, err := config.LoadEnv(env)
	if err != nil {
		fmt.Fprintf(stderr, "outbound demo --fleet: %v\n", err)
		return exitInvalid
	}
	type pod struct {
		fleet *fleet.Fleet
		reg   *registry.Registry
		c     *registry.Client
		rec   *statuspage.Recorder
		calls atomic.Int64
	}
	pods := make([]*pod, fleetPods)
	mux := http.NewServeMux()
	for i := range pods {
		f, err := fleet.New(ctx, fleet.Config{RedisURL: env["OUTBOUND_FLEET_REDIS_URL"], Namespace: "demo"})
		if err != nil {
			fmt.Fprintf(stderr, "outbound demo --fleet: %v\n", err)
			return exitInvalid
		}
		defer f.Close()
		rec := statuspage.NewRecorder()
		reg, err := registry.New(loaded, f.Option(), registry.WithObserver(rec))
		if err != nil {
			fmt.Fprintf(stderr, "outbound demo --fleet: %v\n", err)
			return exitInvalid
		}
		defer reg.Close()
		pods[i] = &pod{fleet: f, reg: reg, c: reg.MustClient("payments"), rec: rec}
		prefix := "/pod-" + strconv.Itoa(i+1)
		mux.Handle(prefix+"/", http.StripPrefix(prefix, statuspage.Handler(reg, rec)))
	}
	statusURL := ""
	if statusAddr != "" {
		url, stop, _, err := startStatus(statusAddr, mux)
		if err != nil {
			fmt.Fprintf(stderr, "outbound demo --fleet: status page: %v\n", err)
			return exitInvalid
		}
		defer stop()
		statusURL = url
	}

	fmt.Fprintf(stdout, "outbound demo --fleet: %d pods share the payments breaker over redis-server %s\n", fleetPods, rs.addr)
	fmt.Fprintf(stdout, "payments fake: healthy for %v, then 503s for %v, in turns; each pod calls every 10-30ms\n", fleetStorm, fleetStorm)
	fmt.Fprintln(stdout, "breaker: MIN_REQUESTS=10, WINDOW=1s, OPEN_TIMEOUT=2s, HALF_OPEN_PROBES=1 (one probe in the whole fleet)")
	if statusURL != "" {
		fmt.Fprintf(stdout, "status pages: %spod-1/ %spod-2/ %spod-3/\n", statusURL, statusURL, statusURL)
	}
	fmt.Fprintln(stdout)

	rctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range pods {
		for range 2 {
			wg.Go(func() {
				for rctx.Err() == nil {
					cctx, ccancel := context.WithTimeout(rctx, demoCallBound)
					req, _ := http.NewRequestWithContext(cctx, http.MethodPost, "/pay", nil)
					if resp, err := p.c.Do(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode < 300 {
							p.calls.Add(1)
						}
					}
					ccancel()
					select {
					case <-rctx.Done():
					case <-time.After(10*time.Millisecond + rand.N(20*time.Millisecond)):
					}
				}
			})
		}
	}

	// Watch the breakers: when the first pod opens, when the others follow.
	var trips []string
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	report := time.NewTicker(time.Second)
	defer report.Stop()
	var firstOpen time.Time
	opened := make([]bool, len(pods))
	lagMax := time.Duration(0)
	hitsAtClose := hits.Load()
loop:
	for {
		select {
		case <-rctx.Done():
			break loop
		case <-tick.C:
			all := true
			for i, p := range pods {
				open := p.c.Status().Breaker == observe.BreakerOpen
				switch {
				case open && !opened[i]:
					opened[i] = true
					if firstOpen.IsZero() {
						firstOpen = time.Now()
					}
					lagMax = max(lagMax, time.Since(firstOpen))
				case !open && opened[i] && p.c.Status().Breaker == observe.BreakerClosed:
					opened[i] = false
				}
				all = all && opened[i]
			}
			if all && !firstOpen.IsZero() {
				lag := "under 1ms" // the watcher's tick
				if lagMax >= time.Millisecond {
					lag = lagMax.Round(time.Millisecond).String()
				}
				trips = append(trips, fmt.Sprintf("t=%4.1fs every pod open within %s of the first, after %d calls of the storm reached the fake",
					time.Since(start).Seconds(), lag, hits.Load()-hitsAtClose))
				fmt.Fprintln(stdout, "  >> "+trips[len(trips)-1])
				firstOpen, lagMax = time.Time{}, 0
				for i := range opened {
					opened[i] = true
				}
			}
			if !failing() {
				hitsAtClose = hits.Load()
			}
		case <-report.C:
			var b strings.Builder
			fmt.Fprintf(&b, "t=%4.1fs fake %-7s", time.Since(start).Seconds(), map[bool]string{true: "503s", false: "healthy"}[failing()])
			for i, p := range pods {
				st := p.c.Status()
				sync := "synced"
				if st.Fleet != nil && !st.Fleet.Synced {
					sync = "local"
				}
				fmt.Fprintf(&b, " | pod-%d %-9s %s %4d paid %4d refused", i+1, st.Breaker, sync, p.calls.Load(), st.BreakerRejected)
			}
			fmt.Fprintln(stdout, b.String())
		}
	}
	cancel()
	wg.Wait()
	fmt.Fprintf(stdout, "\n%d storms tripped the fleet together; the fake saw %d calls in all.\n", len(trips), hits.Load())
	return exitOK
}

// redisServer is the demo's own redis-server.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

// startRedis starts redis-server on a free loopback port, persistence
// off, in a temporary directory, and waits for it to answer PING.
func startRedis(bin string) (*redisServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "outbound-demo-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	rs := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", rs.addr, 200*time.Millisecond); err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return rs, nil
			}
		}
	}
	rs.stop()
	return nil, fmt.Errorf("redis-server on %s did not answer within 5s", rs.addr)
}

func (rs *redisServer) stop() {
	rs.cmd.Process.Kill()
	rs.cmd.Wait()
	os.RemoveAll(rs.dir)
}

// loopbackServer is an HTTP server on a free loopback port.
type loopbackServer struct {
	url  string
	stop func()
}

func serveLoopback(h http.Handler) (*loopbackServer, error) {
	url, stop, _, err := startStatus("127.0.0.1:0", h)
	if err != nil {
		return nil, err
	}
	return &loopbackServer{url: strings.TrimSuffix(url, "/"), stop: stop}, nil
}
