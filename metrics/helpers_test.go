package metrics_test

// The helpers that the package's test files share.

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
)

// upstream serves /ok (200), /flaky (one 503, then 200), /gate (parked
// until the gate opens) and /down (503 forever).
func upstream(t *testing.T) (*outboundtest.Upstream, *outboundtest.Hang) {
	t.Helper()
	gate := outboundtest.NewHang(outboundtest.Reply{Body: "late"})
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.Handle("/flaky", outboundtest.NewScript(outboundtest.Reply{Status: http.StatusServiceUnavailable}, outboundtest.Reply{Body: "ok"}))
	mux.Handle("/gate", gate)
	mux.HandleFunc("/down", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	return outboundtest.NewUpstream(t, mux), gate
}

// get sends GET path with ctx through c, drains and closes the body.
func get(ctx context.Context, c *registry.Client, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Body.Close()
}

// find returns the series of family name with label system=system and
// the other label pairs given.
func find(t *testing.T, g prometheus.Gatherer, name, system string, labelPairs ...string) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"system": system}
	for i := 0; i+1 < len(labelPairs); i += 2 {
		want[labelPairs[i]] = labelPairs[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return m
		}
	}
	t.Fatalf("no %s%v", name, want)
	return nil
}
