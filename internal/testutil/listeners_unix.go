//go:build unix

package testutil

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Blackhole returns the 127.0.0.1 address of a TCP listener that is never
// accepted and whose accept backlog has been filled, so a new connect to it
// hangs (the kernel drops the SYN) until the dialer's timeout: use it to test
// connect timeouts. The listening socket is created with listen(fd, 1), since
// net.Listen always asks for the system's (large) somaxconn backlog, then
// dialled until connects time out; those filler connections stay open until
// t.Cleanup closes them and the socket. Creating it takes a few hundred
// milliseconds (the final, timed-out filler dials).
func Blackhole(t testing.TB) string {
	t.Helper()
	fd, port, err := boundSocket(true)
	if err != nil {
		t.Fatalf("testutil.Blackhole: %v", err)
	}
	held := &connSet{}
	t.Cleanup(func() {
		held.closeAll()
		_ = syscall.Close(fd)
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	fillBacklog(t, addr, held)
	return addr
}

// RefusedAddr returns a 127.0.0.1 address on which connects are refused
// (syscall.ECONNREFUSED): the port is reserved by a socket that is bound but
// not listening, so, unlike "listen then close", no other test can grab the
// port in between. The socket is closed in t.Cleanup.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, port, err := boundSocket(false)
	if err != nil {
		t.Fatalf("testutil.RefusedAddr: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// boundSocket creates a TCP socket bound to 127.0.0.1:0 and, if listen is
// set, listening with a backlog of 1. It returns the raw descriptor (owned by
// the caller) and the port the kernel chose.
func boundSocket(listen bool) (fd, port int, err error) {
	// Hold ForkLock so a concurrent fork+exec can't inherit fd before it
	// is marked close-on-exec (same dance as package net on non-Linux).
	syscall.ForkLock.RLock()
	fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, syscall.IPPROTO_TCP)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, 0, fmt.Errorf("socket: %w", err)
	}
	defer func() {
		if err != nil {
			_ = syscall.Close(fd)
			fd = -1
		}
	}()
	if err = syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fd, 0, fmt.Errorf("bind 127.0.0.1:0: %w", err)
	}
	if listen {
		if err = syscall.Listen(fd, 1); err != nil {
			return fd, 0, fmt.Errorf("listen: %w", err)
		}
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return fd, 0, fmt.Errorf("getsockname: %w", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		err = fmt.Errorf("getsockname: unexpected address %T", sa)
		return fd, 0, err
	}
	return fd, in4.Port, nil
}

// blackholeFillTimeout is how long Blackhole waits for each filler connect;
// a connect that takes longer counts as "the backlog is full".
const blackholeFillTimeout = 100 * time.Millisecond

// blackholeMaxFill bounds how many filler connections Blackhole opens before
// giving up (a backlog of 1 normally holds 1-2 connections).
const blackholeMaxFill = 64

// fillBacklog dials addr until two consecutive connects time out, keeping the
// successful (queued, never accepted) connections in held. Requiring two
// misses in a row guards against one slow dial on a loaded machine being
// mistaken for a full backlog.
func fillBacklog(t testing.TB, addr string, held *connSet) {
	t.Helper()
	d := net.Dialer{Timeout: blackholeFillTimeout}
	misses := 0
	for i := 0; i < blackholeMaxFill && misses < 2; i++ {
		c, err := d.Dial("tcp4", addr)
		if err == nil {
			held.add(c)
			misses = 0
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			misses++
			continue
		}
		t.Fatalf("testutil.Blackhole: filling the backlog of %s: %v", addr, err)
	}
	if misses < 2 {
		t.Fatalf("testutil.Blackhole: %s still accepts connects after %d fillers", addr, blackholeMaxFill)
	}
}
