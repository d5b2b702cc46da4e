//go:build !unix

package otel_test

import "time"

// benchCPU is 0 where the process's CPU time is not read: the benchmark
// reports wall time only.
func benchCPU() time.Duration { return 0 }
