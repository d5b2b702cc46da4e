package registry

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/outbound-go/outbound/outboundtest"
)

// BenchmarkCallAdaptive is BenchmarkCall through the fixed bulkhead and
// the adaptive one (issue 15), in the same run: the adaptive bulkhead's
// cost per call is a clock read before and after send and one Record (a
// lock and a few comparisons; a sort of 64 durations per window).
// BULKHEAD_MAX_WAIT lets a call wait rather than fail if the adaptive
// limit falls below the calls in flight (on loopback latency grows with
// them too).
//
//	go test -run '^$' -bench CallAdaptive -count 10 ./registry/ | benchstat -col /bulkhead -
func BenchmarkCallAdaptive(b *testing.B) {
	for _, inflight := range []int{1, 16, 64} {
		for _, adaptive := range []string{"false", "true"} {
			name := map[string]string{"false": "fixed", "true": "adaptive"}[adaptive]
			b.Run(fmt.Sprintf("inflight=%d/bulkhead=%s", inflight, name), func(b *testing.B) {
				srv := outboundtest.NewUpstream(b, http.HandlerFunc(benchOK))
				_, c := benchRegistry(b, srv.URL, "MAX_CONCURRENT", "64", "BULKHEAD_MAX_WAIT", "5s",
					"ADAPTIVE_CONCURRENCY", adaptive)
				url := srv.URL + "/item"
				b.ReportAllocs()
				benchWorkers(b, inflight, func() error { return benchGet(c.Do, url) })
				b.ReportMetric(float64(c.Status().Limit), "limit")
			})
		}
	}
}
