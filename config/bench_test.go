package config_test

import (
	"fmt"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// BenchmarkLoad1000 loads 1,000 systems declared in code, each with its
// BASE_URL and two timeouts set in the environment. Target: < 100ms/op.
func BenchmarkLoad1000(b *testing.B) {
	const n = 1000
	systems := make([]config.System, n)
	for i := range systems {
		name := fmt.Sprintf("sys%04d", i)
		systems[i] = config.System{Name: name}
		p := config.Prefix(name)
		b.Setenv(p+"_BASE_URL", fmt.Sprintf("https://%s.internal:8443/v1", name))
		b.Setenv(p+"_CONNECT_TIMEOUT", "1s")
		b.Setenv(p+"_READ_TIMEOUT", "5s")
	}
	ls, err := config.Load(systems...)
	if err != nil || len(ls) != n {
		b.Fatalf("Load: %d systems, %v", len(ls), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := config.Load(systems...); err != nil {
			b.Fatal(err)
		}
	}
}
