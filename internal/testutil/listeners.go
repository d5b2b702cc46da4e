package testutil

import (
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
)

// TLSHang starts a plain TCP listener on 127.0.0.1 that accepts connections,
// reads (and discards) whatever the client sends, and never writes a byte.
// A TLS client's handshake therefore times out waiting for the ServerHello;
// an HTTP client likewise times out waiting for response headers. It returns
// the listener's host:port. The listener and every accepted connection are
// closed, and all goroutines joined, in t.Cleanup.
func TLSHang(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testutil.TLSHang: listen on 127.0.0.1: %v", err)
	}
	held := &connSet{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // listener closed by cleanup
			}
			if !held.add(c) {
				_ = c.Close()
				return
			}
			wg.Go(func() {
				// Read until the client gives up or cleanup
				// closes the conn; never answer.
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		held.closeAll()
		wg.Wait()
	})
	return ln.Addr().String()
}

// connSet holds connections until closeAll; after that, add refuses new ones.
type connSet struct {
	mu     sync.Mutex
	closed bool
	conns  []net.Conn
}

func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns = append(s.conns, c)
	return true
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}

// CheckFDs returns the number of file descriptors the test process has open,
// read from /proc/self/fd. On systems without /proc (anything but Linux) it
// returns 0, so callers should skip FD-leak assertions when it does:
//
//	before := testutil.CheckFDs(t)
//	if before == 0 { t.Skip("no /proc/self/fd") }
//
// Closing is partly asynchronous (transport read loops), so compare counts
// after CloseIdleConnections and allow the count a moment to settle.
func CheckFDs(t testing.TB) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		return 0
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Logf("testutil.CheckFDs: %v", err)
		return 0
	}
	// ReadDir's own descriptor for /proc/self/fd is in the listing.
	return len(ents) - 1
}
