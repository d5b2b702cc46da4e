package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// statsPath is the path at which the bench server reports the
// connections it has accepted and the CPU time its process has used
// ("<conns> <cpu-ns>"), so that a client in another process can fill the
// conns and server CPU columns. Every other path gets the 64-byte body.
const statsPath = "/stats"

// server is the loopback server every client calls; it counts the
// connections it accepts.
type server struct {
	base  string // http://host:port
	srv   *http.Server
	conns atomic.Int64
	done  chan error // Serve's error, once it returns
}

// startServer serves on ln until close.
func startServer(ln net.Listener) *server {
	s := &server{base: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == statsPath {
				_, _ = fmt.Fprintf(w, "%d %d", s.conns.Load(), processCPU().Nanoseconds())
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(body)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s
}

func (s *server) close() error {
	err := s.srv.Close()
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// serve is the -serve mode: the bench server alone, in a process of its
// own. It prints its URL as the first line of stdout (the value for
// -target) and serves until SIGINT or SIGTERM.
func serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := startServer(ln)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Println(s.base)
	fmt.Fprintf(os.Stderr, "bench server at %s: %s, GOMAXPROCS=%d, CPUs %s; stop it with SIGINT or SIGTERM\n",
		s.base, runtime.Version(), runtime.GOMAXPROCS(0), cpusAllowed())
	select {
	case <-ctx.Done():
		return s.close()
	case err := <-s.done:
		return fmt.Errorf("serve %s: %w", s.base, err)
	}
}

// serverStats is what the server says about itself: the connections it
// has accepted and the CPU time of its process (< 0: not known apart from
// the client's, when it runs in the same process).
type serverStats struct {
	conns int64
	cpu   time.Duration
}

// upstream is the server of a peer run, in this process or in another.
type upstream struct {
	url    string // the URL every client GETs
	remote bool   // the server runs in another process (-target)
	stats  func() (serverStats, error)
	close  func()
}

// localUpstream starts the bench server in this process.
func localUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := startServer(ln)
	return &upstream{
		url:   s.base + "/item",
		stats: func() (serverStats, error) { return serverStats{conns: s.conns.Load(), cpu: -1}, nil },
		close: func() { _ = s.close() },
	}, nil
}

// remoteUpstream uses the bench server that a -serve process runs at
// target (the URL it printed), and checks that it is one.
func remoteUpstream(target string) (*upstream, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-target %q: want the URL a -serve process printed (http://host:port)", target)
	}
	base := strings.TrimSuffix(target, "/")
	// Its own small client: the statistics are read around a round,
	// outside the measured window.
	t := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	c := &http.Client{Transport: t, Timeout: 5 * time.Second}
	up := &upstream{url: base + "/item", remote: true, close: t.CloseIdleConnections}
	up.stats = func() (serverStats, error) { return remoteStats(c, base+statsPath) }
	if _, err := up.stats(); err != nil {
		up.close()
		return nil, fmt.Errorf("-target %s is not a bench -serve: %w", target, err)
	}
	return up, nil
}

func remoteStats(c *http.Client, url string) (serverStats, error) {
	resp, err := c.Get(url)
	if err != nil {
		return serverStats{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	if err != nil {
		return serverStats{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return serverStats{}, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	var st serverStats
	var cpu int64
	if _, err := fmt.Sscanf(string(b), "%d %d", &st.conns, &cpu); err != nil {
		return serverStats{}, fmt.Errorf("GET %s: %q: %w", url, b, err)
	}
	st.cpu = time.Duration(cpu)
	return st, nil
}
