package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// TestBreakerCommandForcesAPodsBreaker checks `outbound breaker` against a
// pod's controls: forced open, then released; usage errors exit 2 and a
// refusal of the pod exits 1.
func TestBreakerCommandForcesAPodsBreaker(t *testing.T) {
	loaded, err := config.LoadEnv(map[string]string{"OUTBOUND_SYSTEMS": "inv", "INV_BASE_URL": "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(loaded)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	pod := httptest.NewServer(statuspage.Controls(reg))
	defer pod.Close()
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"breaker"}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := run("inv", "open", "--for", "10m", "--pod", pod.URL); code != 0 || !strings.Contains(out, `"forced":{"state":"open"`) {
		t.Fatalf("open: %d %s", code, out)
	}
	if st := reg.MustClient("inv").Status(); st.Forced == nil {
		t.Fatal("the pod's breaker is not forced")
	}
	if code, out := run("inv", "auto", "--pod", pod.URL); code != 0 || reg.MustClient("inv").Status().Forced != nil {
		t.Fatalf("auto: %d %s", code, out)
	}
	if code, out := run("nope", "open", "--pod", pod.URL); code != 1 || !strings.Contains(out, "404") {
		t.Errorf("unknown system: %d %s", code, out)
	}
	for _, args := range [][]string{{"inv", "open"}, {"inv", "shut", "--pod", pod.URL}, {"inv"}} {
		if code, out := run(args...); code != 2 {
			t.Errorf("%v: %d %s, want usage", args, code, out)
		}
	}
}
