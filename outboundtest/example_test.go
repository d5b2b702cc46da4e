package outboundtest_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/outboundtest"
)

// exampleT stands for the *testing.T of a test: an Example has none, so
// this one runs the cleanups (the upstream's Close) when the example ends.
type exampleT struct {
	testing.TB
	cleanups []func()
}

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
