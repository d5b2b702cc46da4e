package otel

import (
	"context"
	"net/url"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// TestMetricServerIsBaseURLsOrOther checks server.address and
// server.port of the metrics: BASE_URL's for a request to its origin,
// however the host is written (a port or its scheme's default, the case
// of its name), and one value, "_OTHER" without a port, for any other.
func TestMetricServerIsBaseURLsOrOther(t *testing.T) {
	for _, tc := range []struct {
		base  string
		want  server
		same  []string
		other []string
	}{
		{"https://Pay.Example/v1", server{"Pay.Example", 443}, []string{"Pay.Example", "pay.example", "pay.example:443"},
			[]string{"pay.example:8443", "evil.example", "evil.example:443"}},
		{"http://127.0.0.1:8080", server{"127.0.0.1", 8080}, []string{"127.0.0.1:8080"},
			[]string{"127.0.0.1", "127.0.0.1:8081", "127.0.0.2:8080"}},
		{"http://[::1]:8080", server{"::1", 8080}, []string{"[::1]:8080"}, []string{"[::1]", "[::1]:9090"}},
	} {
		s := newSystem("payments")
		u, _ := url.Parse(tc.base)
		s.learnStatus(&observe.Status{Config: []config.Var{{Setting: "BaseURL", Value: tc.base}}})
		for _, host := range tc.same {
			if got := s.metricServer("", host); got != tc.want {
				t.Errorf("BASE_URL %s, request to %s: %v, want %v", u, host, got, tc.want)
			}
		}
		for _, host := range tc.other {
			if got := s.metricServer("", host); got != otherServer {
				t.Errorf("BASE_URL %s, request to %s: %v, want %v", u, host, got, otherServer)
			}
		}
	}
}

// TestOriginUnreadIsTheFirstHostSeen checks a system whose BASE_URL was
// not read (its events handed over by another observer): the first host
// it sees is its origin, every other one "_OTHER".
func TestOriginUnreadIsTheFirstHostSeen(t *testing.T) {
	s := newSystem("payments")
	if got, want := s.metricServer("https", "pay.example"), (server{"pay.example", 443}); got != want {
		t.Errorf("first request: %v, want %v", got, want)
	}
	if got := s.metricServer("http", "evil.example:8080"); got != otherServer {
		t.Errorf("a request elsewhere: %v, want %v", got, otherServer)
	}
	if got, want := s.metricServer("", "pay.example"), (server{"pay.example", 443}); got != want {
		t.Errorf("an event of the origin: %v, want %v", got, want)
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
		{otherStatus, 0, "_OTHER"},
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
	ev := observe.AttemptEvent{System: "payments", RouteName: "get-charge", Method: "GET", Host: "127.0.0.1:8080",
		Route: "/v1/charges/{id}", Attempt: 1, Status: 200, Outcome: observe.OutcomeOK}
	call := observe.CallEvent{System: "payments", RouteName: "get-charge", Method: "GET", Attempts: 1, Status: 200,
		Outcome: observe.OutcomeOK}
	other := ev
	other.Host, other.Status = "127.0.0.1:9090", 999 // a hop elsewhere, a made-up status
	if n := testing.AllocsPerRun(100, func() { i.ObserveAttempt(ev); i.ObserveAttempt(other); i.ObserveCall(call) }); n != 0 {
		t.Errorf("two attempts and a call recorded cost %v allocations, want 0", n)
	}
}
