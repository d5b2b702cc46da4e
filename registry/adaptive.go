package registry

import (
	"net/http"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/internal/policy"
)

// adaptiveStage measures each call for an adaptive bulkhead
// (ADAPTIVE_CONCURRENCY=true): its latency from admission to the
// response headers (or the error), redirects and retries included, and
// whether it failed as an overloaded upstream fails (a timeout, a
// transport error, a temporary status). Calls that tell nothing of the
// upstream's load are not recorded: the table of ops says which
// (observe.Op.Load). It is in the chain only with an adaptive bulkhead.
type adaptiveStage struct {
	bh   *bulkhead.Bulkhead
	next callStage
}

func (s *adaptiveStage) handle(cl *call) (*http.Response, error) {
	start := time.Now()
	resp, err := s.next.handle(cl)
	switch e, _ := err.(*Error); {
	case err == nil:
		s.bh.Record(start, policy.TemporaryStatus(resp.StatusCode))
	case e == nil || e.Op.Load():
		s.bh.Record(start, true)
	}
	return resp, err
}
