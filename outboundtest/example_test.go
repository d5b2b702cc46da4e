package outboundtest_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
)

// exampleT stands for the *testing.T of a test: an Example has none, so
// this one runs the cleanups (the upstream's Close) when the example ends.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Errorf(format string, a ...any) { fmt.Printf(format+"\n", a...) }

func (t *exampleT) Helper()                        {}
func (t *exampleT) Cleanup(f func())               { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (t *exampleT) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// A 503 storm of two requests, then health, seen by a plain client; the
// upstream counts what reached it.
func ExampleStorm() {
	t := &exampleT{}
	defer t.done()
	up := outboundtest.NewUpstream(t, outboundtest.Storm(2))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for range 3 {
		resp, err := c.Get(up.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		// Read to the end, or the connection is not reused.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	fmt.Printf("requests %d, connections %d\n", up.Requests(), up.Conns())
	// Output:
	// 503 Service Unavailable
	// 503 Service Unavailable
	// 200 OK
	// requests 3, connections 1
}

// A script answers in arrival order and records every request.
func ExampleNewScript() {
	t := &exampleT{}
	defer t.done()
	s := outboundtest.NewScript(
		outboundtest.Throttle(2*time.Second), // 429, Retry-After: 2
		outboundtest.Reply{Status: http.StatusCreated, Body: `{"id":"pay_1"}`},
	)
	up := outboundtest.NewUpstream(t, s)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, up.URL+"/v2/payments", strings.NewReader(`{"amount":1999}`))
		req.Header.Set("Idempotency-Key", "order-42")
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("%d Retry-After %q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, r := range s.Received() {
		fmt.Println(r.Seq, r.Method, r.Path, r.Header.Get("Idempotency-Key"), string(r.Body))
	}
	// Output:
	// 429 Retry-After "2"
	// 201 Retry-After ""
	// 1 POST /v2/payments order-42 {"amount":1999}
	// 2 POST /v2/payments order-42 {"amount":1999}
}

// Flapping on a schedule of request counts: two healthy, one failing.
func ExampleFlap() {
	t := &exampleT{}
	defer t.done()
	up := outboundtest.NewUpstream(t, outboundtest.Flap(2, 1))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for range 6 {
		resp, err := c.Get(up.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ")
	}
	fmt.Println()
	// Output:
	// 200 200 503 200 200 503
}

// The whole kit: a registry built from an in-code map (no process
// environment, so the test can run in parallel) against an upstream in a
// 503 storm; the registry retries through it, and the end-of-test check
// finds the pipeline clean.
func Example_registry() {
	t := &exampleT{}
	defer t.done()
	up := outboundtest.NewUpstream(t, outboundtest.Storm(2))
	reg := registrytest.New(t, map[string]string{
		"OUTBOUND_SYSTEMS":       "inventory",
		"INVENTORY_BASE_URL":     up.URL,
		"INVENTORY_RETRIES":      "2",
		"INVENTORY_BACKOFF_BASE": "1ms",
		"INVENTORY_BACKOFF_MAX":  "2ms",
	}, registrytest.Watch(up))

	inv := reg.MustClient("inventory")
	req, _ := http.NewRequest(http.MethodGet, "/stock/42", nil)
	resp, err := inv.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	st := inv.Status()
	fmt.Printf("%d %s after %d retries; the upstream saw %d requests\n", resp.StatusCode, body, st.Retries, up.Requests())
	// Output:
	// 200 ok after 2 retries; the upstream saw 3 requests
}
