//go:build !unix

package registry_test

import "time"

// benchCPU is not measured here: cpu-ns/op is reported as 0.
func benchCPU() time.Duration { return 0 }
