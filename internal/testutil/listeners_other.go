//go:build !unix

package testutil

import "testing"

// Blackhole needs raw sockets (listen with a backlog of 1); on this platform
// it skips the test. See listeners_unix.go for the real implementation.
func Blackhole(t testing.TB) string {
	t.Helper()
	t.Skip("testutil.Blackhole: not supported on this platform")
	return ""
}

// RefusedAddr needs raw sockets (bind without listen); on this platform it
// skips the test. See listeners_unix.go for the real implementation.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	t.Skip("testutil.RefusedAddr: not supported on this platform")
	return ""
}
