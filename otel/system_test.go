package otel

import (
	"context"
	"net/url"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/outbound-go/outbound/observe"
)

// TestServerPortOfAHostWithoutOneIsItsSchemes checks server.port: the
// port of host:port, and for a host without one the default of the
// scheme its attempts used (which the events do not carry).
func TestServerPortOfAHostWithoutOneIsItsSchemes(t *testing.T) {
	s := newSystem("payments")
	if host, port := s.splitHost("pay.example"); host != "pay.example" || port != 0 {
		t.Errorf("before any attempt: %s %d, want pay.example and no port", host, port)
	}
	u, _ := url.Parse("https://pay.example/v1/charges")
	if host, port := s.urlHostPort(u); host != "pay.example" || port != 443 {
		t.Errorf("attempt to %s: %s %d, want pay.example 443", u, host, port)
	}
	for hostport, want := range map[string]struct {
		host string
		port int
	}{
		"pay.example":      {"pay.example", 443},
		"pay.example:8443": {"pay.example", 8443},
		"[::1]:8080":       {"::1", 8080},
		"[::1]":            {"::1", 443},
	} {
		if host, port := s.splitHost(hostport); host != want.host || port != want.port {
			t.Errorf("splitHost(%q) = %s %d, want %s %d", hostport, host, port, want.host, want.port)
		}
	}
}

// TestErrorTypeIsTheStatusOrTheOp checks error.type: the status from 400
// up, the op without a response, nothing for a success.
func TestErrorTypeIsTheStatusOrTheOp(t *testing.T) {
	for _, tc := range []struct {
		status int
		op     observe.Op
		want   string
	}{
		{200, 0, ""},
		{302, 0, ""},
		{404, 0, "404"},
		{503, 0, "503"},
		{0, observe.OpConnectTimeout, "connect timeout"},
		{0, observe.OpReadTimeout, "read timeout"},
		{0, 0, ""},
	} {
		if got := errorType(tc.status, tc.op); got != tc.want {
			t.Errorf("errorType(%d, %v) = %q, want %q", tc.status, tc.op, got, tc.want)
		}
	}
}

// TestRecordingAnEventAllocatesNothingOnceItsSetIsKnown checks the cost
// of the event path with the SDK's meter: the attribute sets are
// resolved once.
func TestRecordingAnEventAllocatesNothingOnceItsSetIsKnown(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	i, err := New(WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer i.Close()
	ev := observe.AttemptEvent{System: "payments", Method: "GET", Host: "127.0.0.1:8080", Route: "/v1/charges/{id}",
		Attempt: 1, Status: 200, Outcome: observe.OutcomeOK}
	call := observe.CallEvent{System: "payments", Method: "GET", Attempts: 1, Status: 200, Outcome: observe.OutcomeOK}
	if n := testing.AllocsPerRun(100, func() { i.ObserveAttempt(ev); i.ObserveCall(call) }); n != 0 {
		t.Errorf("an attempt and a call recorded cost %v allocations, want 0", n)
	}
}
