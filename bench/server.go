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
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// connsPath is the path at which the bench server reports the number of
// connections it has accepted, so that a client in another process can
// fill the conns column. Every other path gets the 64-byte body.
const connsPath = "/conns"

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
			if r.URL.Path == connsPath {
				_, _ = io.WriteString(w, strconv.FormatInt(s.conns.Load(), 10))
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

// upstream is the server of a peer run, in this process or in another.
type upstream struct {
	url    string // the URL every client GETs
	remote bool   // the server runs in another process (-target)
	conns  func() (int64, error)
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
		conns: func() (int64, error) { return s.conns.Load(), nil },
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
	// Its own small client: the conns count is read before and after a
	// round, outside the measured window.
	t := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	c := &http.Client{Transport: t, Timeout: 5 * time.Second}
	up := &upstream{url: base + "/item", remote: true, close: t.CloseIdleConnections}
	up.conns = func() (int64, error) { return remoteConns(c, base+connsPath) }
	if _, err := up.conns(); err != nil {
		up.close()
		return nil, fmt.Errorf("-target %s is not a bench -serve: %w", target, err)
	}
	return up, nil
}

func remoteConns(c *http.Client, url string) (int64, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	return n, nil
}
