package statuspage_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/statuspage"
)

// TestControlsForceAndReleaseABreaker checks the operator's controls: a
// forced open shows in the system's status and refuses calls, auto
// releases it, and bad requests are refused with what is wrong.
func TestControlsForceAndReleaseABreaker(t *testing.T) {
	reg := registrytest.New(t, map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": "http://127.0.0.1:1"})
	h := statuspage.Controls(reg)
	do := func(method, target string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		return rec
	}
	rec := do(http.MethodPost, "/breaker/inv?state=open&for=10m")
	var st observe.Status
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &st) != nil || st.Forced == nil || st.Breaker != observe.BreakerOpen {
		t.Fatalf("force open: %d %s", rec.Code, rec.Body)
	}
	if err := reg.MustClient("inv").Force(observe.BreakerOpen, 0); err == nil {
		t.Error("Force with no duration accepted")
	}
	if rec := do(http.MethodPost, "/breaker/inv?state=auto"); rec.Code != 200 || reg.MustClient("inv").Status().Forced != nil {
		t.Errorf("release: %d %s", rec.Code, rec.Body)
	}
	for target, want := range map[string]int{
		"/breaker/inv?state=half-open":     400,
		"/breaker/inv?state=open&for=soon": 400,
		"/breaker/inv?state=open&for=48h":  400,
		"/breaker/nope?state=open":         404,
		"/status.json":                     404,
	} {
		if rec := do(http.MethodPost, target); rec.Code != want {
			t.Errorf("POST %s: %d %s, want %d", target, rec.Code, rec.Body, want)
		}
	}
	if rec := do(http.MethodGet, "/breaker/inv?state=open"); rec.Code != 405 {
		t.Errorf("GET: %d, want 405", rec.Code)
	}
}
