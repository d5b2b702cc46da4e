package sdk_test

import (
	"testing"

	"github.com/outbound-go/outbound/outboundtest"
)

// Requests an SDK builds through HTTPClient() are matched to routes by the
// API's own path: one stripe-go client gets a policy per operation with no
// code. The balance route never retries, while the system's other calls
// (openai's models, on its own system here) retry twice.
func TestSDKRequestsRunOnTheirRoutesPolicy(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outage)
	s := newSDKs(t, up, false, "RETRIES", "2",
		"ROUTES", "balance", "ROUTE_BALANCE_MATCH", "GET /v1/balance", "ROUTE_BALANCE_RETRIES", "0")
	if err := s.call(bounded(t), "stripe"); err == nil {
		t.Fatal("an outage gave no error")
	}
	if n := up.Requests(); n != 1 {
		t.Errorf("stripe GET /v1/balance: %d upstream requests, want 1 (the route's RETRIES=0)", n)
	}
	if rs := s.stripeC.Status().Routes; len(rs) != 1 || rs[0].Calls != 1 {
		t.Errorf("stripe routes %+v, want the balance route with its 1 call", rs)
	}
	if err := s.call(bounded(t), "openai"); err == nil {
		t.Fatal("an outage gave no error")
	}
	if n := up.Requests(); n != 1+3 {
		t.Errorf("openai GET /v1/models/gpt-x: %d upstream requests in all, want 1 + 3 (no route: the system's RETRIES=2)", n)
	}
}
