package metrics_test

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// A 503, then a retry whose first copy hangs and whose hedge wins. The
// hedge shows in hedges sent and won, the cancelled copy as an attempt
// "hedge_lost", and the hedge of the retry is no second retry. The hedge
// delay (250ms) is what a busy machine may take to bring the 503 back: a
// first attempt still unanswered then is hedged too, and its hedge would
// be the copy that hangs.
func TestHedgesCountedSentWonAndLost(t *testing.T) {
	var n atomic.Int64
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case 2: // the retry's first copy hangs
			outboundtest.Wait(r, time.Minute)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	m := metrics.New(nil)
	reg := registrytest.New(t, map[string]string{config.SystemsVar: "inv", "INV_BASE_URL": up.URL, "INV_HEDGE_DELAY": "250ms",
		"INV_BACKOFF_BASE": "1ms", "INV_BACKOFF_MAX": "2ms"}, registrytest.With(registry.WithObserver(m)))
	if err := m.Watch(reg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if status, err := get(ctx, reg.MustClient("inv"), "/"); err != nil || status != http.StatusOK {
		t.Fatalf("GET = %d, %v; want 200 from the hedge", status, err)
	}
	g := prometheus.NewRegistry()
	g.MustRegister(m)
	for name, want := range map[string]float64{"outbound_hedges_sent_total": 1, "outbound_hedges_won_total": 1, "outbound_retries_total": 1} {
		if got := find(t, g, name, "inv").GetCounter().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := find(t, g, "outbound_attempts_total", "inv", "outcome", "hedge_lost").GetCounter().GetValue(); got != 1 {
		t.Errorf("attempts{outcome=hedge_lost} = %v, want 1", got)
	}
}
