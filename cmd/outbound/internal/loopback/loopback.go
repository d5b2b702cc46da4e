// Package loopback serves the demo's HTTP handlers (the status page, the
// fleet's fake upstream) on the loopback interface, and on no other: a
// demo never listens where another machine could reach it.
package loopback

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"
)

// shutdownGrace bounds how long Stop waits for requests in flight before
// it closes their connections.
const shutdownGrace = 2 * time.Second

// Check refuses an address that is not on the loopback interface.
func Check(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("not a loopback address: use 127.0.0.1:PORT, [::1]:PORT or localhost:PORT")
}

// Server is an HTTP server started by [Serve].
type Server struct {
	// URL is the server's root, "http://127.0.0.1:PORT/".
	URL string
	// Note says why the server is not on the address it was asked for
	// (that address was busy); empty when it is.
	Note string

	srv  *http.Server
	done chan struct{}
}

// Serve serves h on addr, or on a free port of the same host when addr
// is busy (then Note says so). The caller checks addr with [Check]
// first; Stop shuts the server down.
func Serve(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	note := ""
	if errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(addr)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		note = addr + " is busy: the status page took a free port"
	}
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:  "http://" + ln.Addr().String() + "/",
		Note: note,
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // ErrServerClosed at Stop
	}()
	return s, nil
}

// Stop shuts the server down, closing the connections of requests still
// running after a short grace, and waits until it has stopped.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		_ = s.srv.Close()
	}
	<-s.done
}
