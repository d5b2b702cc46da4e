//go:build !unix

package registry

import "time"

// benchCPU is not measured here: cpu-ns/op is reported as 0.
func benchCPU() time.Duration { return 0 }
