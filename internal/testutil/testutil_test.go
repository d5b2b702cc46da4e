package testutil_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/outboundtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// callTimeout bounds every client call that is expected to complete; calls
// expected to time out use much shorter, explicit bounds.
const callTimeout = 10 * time.Second

// newClient returns a client with its own Transport, whose idle connections
// are closed when the test ends.
func newClient(t *testing.T) (*http.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

type result struct {
	status int
	header http.Header
	body   string
}

// do sends a request bounded by timeout and reads the whole body.
func do(c *http.Client, method, url, body string, timeout time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, string(b)}, err
}

func get(t *testing.T, c *http.Client, url string) result {
	t.Helper()
	res, err := do(c, http.MethodGet, url, "", callTimeout)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestScriptAnswersInOrderAndRecords(t *testing.T) {
	c, _ := newClient(t)
	srv := testutil.Script(t,
		outboundtest.Reply{Status: 503},
		outboundtest.Reply{Status: 503, Header: http.Header{"X-Attempt": {"2"}}},
		outboundtest.Reply{Status: 200, Body: "ok"})

	var got []int
	for i := range 4 {
		res, err := do(c, http.MethodPost, srv.URL+"/v1/thing?x=1", "payload", callTimeout)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got = append(got, res.status)
		if i == 1 && res.header.Get("X-Attempt") != "2" {
			t.Errorf("request 2: X-Attempt = %q, want 2", res.header.Get("X-Attempt"))
		}
		if res.status == 200 && res.body != "ok" {
			t.Errorf("request %d: body %q, want ok", i, res.body)
		}
	}
	if want := []int{503, 503, 200, 200}; !equal(got, want) {
		t.Fatalf("statuses = %v, want %v (last step repeats)", got, want)
	}
	if srv.Hits() != 4 || srv.Requests() != 4 {
		t.Fatalf("Hits() = %d, Requests() = %d, want 4", srv.Hits(), srv.Requests())
	}
	for i, r := range srv.Received() {
		if r.Seq != i+1 || r.Method != http.MethodPost || r.Path != "/v1/thing" ||
			r.Query != "x=1" || string(r.Body) != "payload" || r.Header.Get("Content-Length") != "7" {
			t.Errorf("Received()[%d] = %+v", i, r)
		}
	}
}

func TestScriptThreeStepsHitsThree(t *testing.T) {
	c, _ := newClient(t)
	srv := testutil.Script(t, outboundtest.Reply{Status: 503}, outboundtest.Reply{Status: 503},
		outboundtest.Reply{Status: 200, Body: "ok"})
	var got []int
	for range 3 {
		got = append(got, get(t, c, srv.URL).status)
	}
	if want := []int{503, 503, 200}; !equal(got, want) || srv.Hits() != 3 {
		t.Fatalf("statuses = %v, Hits() = %d; want %v and 3", got, srv.Hits(), want)
	}
}

func TestFailN(t *testing.T) {
	c, _ := newClient(t)
	srv := testutil.Script(t, testutil.FailN(2, http.StatusInternalServerError)...)
	var got []int
	for range 4 {
		got = append(got, get(t, c, srv.URL).status)
	}
	if want := []int{500, 500, 200, 200}; !equal(got, want) {
		t.Fatalf("statuses = %v, want %v", got, want)
	}
}

func TestScriptStepHandler(t *testing.T) {
	c, _ := newClient(t)
	srv := testutil.Script(t, outboundtest.Reply{Handler: outboundtest.Reset()}, outboundtest.Reply{Body: "ok"})
	if _, err := do(c, http.MethodGet, srv.URL, "", callTimeout); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("first request: err = %v, want connection reset", err)
	}
	if res := get(t, c, srv.URL); res.status != 200 || res.body != "ok" {
		t.Fatalf("second request = %d %q, want 200 ok", res.status, res.body)
	}
}

func TestConnCounterConcurrent(t *testing.T) {
	const n = 5
	c, _ := newClient(t)
	gate := outboundtest.NewHang(outboundtest.Reply{Body: "ok"})
	srv := outboundtest.NewUpstream(t, gate)

	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := do(c, http.MethodGet, srv.URL, "", callTimeout)
			errs <- err
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	// All n requests in flight at once force n separate connections.
	if err := gate.WaitFor(ctx, n); err != nil {
		t.Fatalf("waiting for %d parked requests: %v (parked %d)", n, err, gate.Waiting())
	}
	if srv.InFlight() != n {
		t.Errorf("Active() = %d while parked, want %d", srv.InFlight(), n)
	}
	gate.Release()
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("request: %v", err)
		}
	}
	if srv.Conns() != n || srv.MaxInFlight() != n || srv.Requests() != n {
		t.Fatalf("Conns=%d MaxActive=%d Requests=%d, want %d each",
			srv.Conns(), srv.MaxInFlight(), srv.Requests(), n)
	}
}

func TestLargeBodyReuse(t *testing.T) {
	c, _ := newClient(t)
	srv := testutil.Script(t, testutil.LargeBody(http.StatusInternalServerError, testutil.LargeBodySize))

	// Drained bodies let the connection be reused.
	for range 2 {
		if res := get(t, c, srv.URL); res.status != 500 || len(res.body) != testutil.LargeBodySize {
			t.Fatalf("got %d with %d bytes, want 500 with %d", res.status, len(res.body), testutil.LargeBodySize)
		}
	}
	if srv.Conns() != 1 {
		t.Fatalf("after draining: Conns() = %d, want 1", srv.Conns())
	}

	// Closing a body without draining it throws the connection away. The
	// body is longer than net/http drains on Close itself (from Go 1.27 it
	// drains one of at most 256 KiB, or of unknown length, for up to 50ms).
	const unread = 512 << 10
	big := testutil.Script(t, testutil.LargeBody(http.StatusInternalServerError, unread))
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, big.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != unread {
		t.Errorf("ContentLength = %d, want %d", resp.ContentLength, unread)
	}
	resp.Body.Close()
	get(t, c, big.URL)
	if big.Conns() != 2 {
		t.Fatalf("after an undrained body: Conns() = %d, want 2", big.Conns())
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
