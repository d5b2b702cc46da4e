package registry

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/outbound-go/outbound/outboundtest"
)

// BenchmarkHedgeArmed is BenchmarkCall's registry client with hedging
// on (HEDGE_DELAY=1s: armed on every call, never fired against a fast
// loopback server), against the same client with hedging off: what the
// hedge stage costs a call that needs no hedge.
func BenchmarkHedgeArmed(b *testing.B) {
	for _, delay := range []string{"0", "1s"} {
		for _, inflight := range []int{1, 16} {
			b.Run(fmt.Sprintf("delay=%s/inflight=%d", delay, inflight), func(b *testing.B) {
				srv := outboundtest.NewUpstream(b, http.HandlerFunc(benchOK))
				_, c := benchRegistry(b, srv.URL, "MAX_CONCURRENT", "64", "HEDGE_DELAY", delay)
				url := srv.URL + "/item"
				b.ReportAllocs()
				benchWorkers(b, inflight, func() error { return benchGet(c.Do, url) })
			})
		}
	}
}
