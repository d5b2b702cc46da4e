//go:build unix

package otel_test

import (
	"syscall"
	"time"
)

// benchCPU returns the CPU time (user and system) this process has used:
// client and loopback server together. Unlike wall time it barely moves
// when other processes load the machine.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
