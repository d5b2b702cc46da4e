package outboundtest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/policy"
	"github.com/outbound-go/outbound/outboundtest"
	"go.uber.org/goleak"
)

// Every behaviour observed on the wire, through a plain http.Client. Checks
// are on the kind of failure and on counts; a duration is only ever a lower
// bound.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client returns an http.Client of its own whose idle connections close
// at the end of the test.
func client(t *testing.T) (*http.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

// doer is an *http.Client or a *registry.Client.
type doer interface {
	Do(*http.Request) (*http.Response, error)
}

// get sends a GET under a 10 s deadline and returns the status and the
// whole body.
func get(t *testing.T, c doer, url string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 5s", what)
		}
	}
}

func TestHealthyCountsRequestsAndConns(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Healthy())
	c, tr := client(t)
	for i := range 3 {
		if status, body, err := get(t, c, up.URL); err != nil || status != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q %v, want 200 ok", i+1, status, body, err)
		}
	}
	if up.Requests() != 3 || up.Conns() != 1 || up.MaxInFlight() != 1 {
		t.Errorf("requests %d, conns %d, max in flight %d; want 3, 1 (kept alive), 1",
			up.Requests(), up.Conns(), up.MaxInFlight())
	}
	if up.OpenConns() != 1 {
		t.Errorf("open conns %d, want the idle one", up.OpenConns())
	}
	tr.CloseIdleConnections()
	eventually(t, "the idle connection closes", func() bool { return up.OpenConns() == 0 })
}

func TestSlowHeaders(t *testing.T) {
	t.Parallel()
	t.Run("TripsResponseHeaderTimeout", func(t *testing.T) {
		t.Parallel()
		up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(time.Minute))
		c, tr := client(t)
		tr.ResponseHeaderTimeout = 100 * time.Millisecond
		_, _, err := get(t, c, up.URL)
		var ne interface{ Timeout() bool }
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("err = %v, want a timeout", err)
		}
	})
	t.Run("AnswersAfterTheDelay", func(t *testing.T) {
		t.Parallel()
		up := outboundtest.NewUpstream(t, outboundtest.SlowHeaders(50*time.Millisecond))
		c, _ := client(t)
		start := time.Now()
		status, body, err := get(t, c, up.URL)
		if err != nil || status != 200 || body != "ok" {
			t.Fatalf("%d %q %v, want 200 ok", status, body, err)
		}
		if el := time.Since(start); el < 50*time.Millisecond {
			t.Errorf("answered after %v, want at least 50ms", el)
		}
	})
}

func TestTrickleDeliversBytesOverTime(t *testing.T) {
	t.Parallel()
	const every = 20 * time.Millisecond
	up := outboundtest.NewUpstream(t, outboundtest.Trickle(every))
	c, _ := client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 3)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "xxx" {
		t.Fatalf("read %q, %v; want xxx", buf, err)
	}
	if el := time.Since(start); el < 3*every {
		t.Errorf("3 bytes in %v, want one per %v at most", el, every)
	}
}

func TestTrickleStallsUnderADeadline(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Trickle(time.Hour))
	c, _ := client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("the headers come at once: %v", err)
	}
	defer resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("body read: %v, want context.DeadlineExceeded", err)
	}
}

func TestResetIsATransportError(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Reset())
	c, _ := client(t)
	_, _, err := get(t, c, up.URL)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("err = %v, want ECONNRESET", err)
	}
}

func TestResetMidBody(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.ResetMidBody(1000))
	c, _ := client(t)
	status, body, err := get(t, c, up.URL)
	if err == nil {
		t.Fatalf("%d with %d bytes and no error, want the body cut", status, len(body))
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want ECONNRESET or io.ErrUnexpectedEOF", err)
	}
	if len(body) > 1000 || strings.Trim(body, "x") != "" {
		t.Errorf("body %d bytes, want at most the 1000 x sent", len(body))
	}
	t.Logf("status %d, %d bytes, then %v", status, len(body), err)
}

func TestEOF(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.EOF())
	c, _ := client(t)
	// A POST: net/http retries an idempotent request on a fresh
	// connection's EOF only once the connection was reused, never here.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, up.URL, strings.NewReader("x"))
	_, err := c.Do(req)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want io.EOF", err)
	}
}

func TestHangReturnsOnlyAfterRelease(t *testing.T) {
	t.Parallel()
	hang := outboundtest.NewHang(outboundtest.Reply{Status: http.StatusAccepted})
	up := outboundtest.NewUpstream(t, hang)
	c, _ := client(t)
	const n = 3
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			status, _, err := get(t, c, up.URL)
			if err != nil {
				t.Error(err)
			}
			statuses <- status
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := hang.WaitFor(ctx, n); err != nil {
		t.Fatalf("%d requests held, want %d: %v", hang.Waiting(), n, err)
	}
	if len(statuses) != 0 {
		t.Fatal("a call returned before the release")
	}
	if up.InFlight() != n || up.MaxInFlight() != n || up.Conns() != n {
		t.Errorf("in flight %d, max %d, conns %d; want %d each", up.InFlight(), up.MaxInFlight(), up.Conns(), n)
	}
	hang.Release()
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusAccepted {
			t.Errorf("status %d after the release, want 202", s)
		}
	}
	if hang.Waiting() != 0 || up.InFlight() != 0 {
		t.Errorf("still waiting %d, in flight %d; want 0", hang.Waiting(), up.InFlight())
	}
}

// Close does not wait for a handler held forever: it releases it, and
// the client sees the connection drop.
func TestCloseReleasesAHungHandler(t *testing.T) {
	t.Parallel()
	hang := outboundtest.NewHang(nil)
	up := outboundtest.NewUpstream(t, hang)
	c, _ := client(t)
	errc := make(chan error, 1)
	go func() { _, _, err := get(t, c, up.URL); errc <- err }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := hang.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { up.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited on the hung handler")
	}
	if err := <-errc; err == nil {
		t.Error("the held call succeeded, want the connection dropped")
	}
}

func TestStormCounts(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Storm(3))
	c, _ := client(t)
	var got []int
	for range 5 {
		status, _, err := get(t, c, up.URL)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, status)
	}
	if want := []int{503, 503, 503, 200, 200}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if up.Requests() != 5 || up.Conns() != 1 {
		t.Errorf("requests %d, conns %d; want 5 on 1 connection", up.Requests(), up.Conns())
	}
}

func TestThrottleRetryAfterParses(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(90 * time.Second).Truncate(time.Second)
	tests := []struct {
		name  string
		reply outboundtest.Reply
		want  string
		wait  time.Duration
	}{
		{"seconds, rounded up", outboundtest.Throttle(1500 * time.Millisecond), "2", 2 * time.Second},
		{"HTTP date", outboundtest.ThrottleUntil(at), at.UTC().Format(http.TimeFormat), 90 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := outboundtest.NewUpstream(t, tt.reply)
			c, _ := client(t)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			v := resp.Header.Get("Retry-After")
			if resp.StatusCode != http.StatusTooManyRequests || v != tt.want {
				t.Fatalf("%d Retry-After %q, want 429 %q", resp.StatusCode, v, tt.want)
			}
			d, ok := policy.ParseRetryAfter(v, time.Now())
			if !ok || d <= 0 || d > tt.wait {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want (0, %v]", v, d, ok, tt.wait)
			}
		})
	}
}

func TestFlapByRequestCount(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, outboundtest.Flap(2, 1))
	c, _ := client(t)
	var got []int
	for range 6 {
		status, _, _ := get(t, c, up.URL)
		got = append(got, status)
	}
	if want := []int{200, 200, 503, 200, 200, 503}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
}

func TestFlapOnAnInjectedClock(t *testing.T) {
	t.Parallel()
	var now atomic.Int64 // nanoseconds on the fake clock
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	up := outboundtest.NewUpstream(t, outboundtest.FlapClock(clock, time.Minute, 10*time.Second))
	c, _ := client(t)
	for _, step := range []struct {
		at   time.Duration
		want int
	}{
		{0, 200}, {59 * time.Second, 200}, {time.Minute, 503}, {69 * time.Second, 503},
		{70 * time.Second, 200}, {130 * time.Second, 503},
	} {
		now.Store(int64(step.at))
		if status, _, err := get(t, c, up.URL); err != nil || status != step.want {
			t.Errorf("at %v: %d %v, want %d", step.at, status, err, step.want)
		}
	}
}

func TestScriptRecordsInOrder(t *testing.T) {
	t.Parallel()
	s := outboundtest.NewScript(outboundtest.Reply{Status: 503}, outboundtest.Reply{Status: 201, Body: "made"})
	up := outboundtest.NewUpstream(t, s)
	c, _ := client(t)
	for i, want := range []int{503, 201, 201} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, up.URL+"/stock/978%2F0?x=1", strings.NewReader("body"))
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("request %d: %v %v, want %d", i+1, resp, err, want)
		}
		resp.Body.Close()
		cancel()
	}
	rec := s.Received()
	if s.Hits() != 3 || len(rec) != 3 {
		t.Fatalf("hits %d, recorded %d; want 3", s.Hits(), len(rec))
	}
	r := rec[2]
	if r.Seq != 3 || r.Method != http.MethodPost || r.Path != "/stock/978/0" || r.EscapedPath != "/stock/978%2F0" ||
		r.Query != "x=1" || string(r.Body) != "body" {
		t.Errorf("recorded %+v", r)
	}
}

func TestFlapRejectsAnEmptySchedule(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Flap(0, 0) did not panic")
		}
	}()
	outboundtest.Flap(0, 0)
}

func TestTLSUpstream(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewTLSUpstream(t, outboundtest.Reply{Body: "secure"})
	c, tr := client(t)
	pool := x509.NewCertPool()
	pool.AddCert(up.Certificate())
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	if status, body, err := get(t, c, up.URL); err != nil || status != 200 || body != "secure" || up.Conns() != 1 {
		t.Fatalf("%d %q %v with %d conns, want 200 secure on 1", status, body, err, up.Conns())
	}
}

// The cleanup of a test never waits for the upstream's waiting handlers:
// each client below would wait 10 s, but fails as soon as the subtest,
// and with it the upstream, ends.
func TestCleanupReleasesEveryWaitingBehaviour(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	t.Run("inner", func(t *testing.T) {
		c, _ := client(t)
		for _, h := range []http.Handler{
			outboundtest.SlowHeaders(time.Hour),
			outboundtest.Trickle(time.Hour),
			outboundtest.NewHang(nil),
			outboundtest.NewScript(outboundtest.Reply{Delay: time.Hour}),
			outboundtest.NewScript(outboundtest.Reply{Handler: outboundtest.NewHang(nil)}),
		} {
			up := outboundtest.NewUpstream(t, h)
			wg.Go(func() {
				// Not t.Context(): it ends before the cleanups run.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
				resp, err := c.Do(req)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				errs <- err
			})
			eventually(t, "the request reaches the handler", func() bool { return up.InFlight() == 1 })
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("client err = %v, want the upstream's cleanup to break the request", err)
		}
	}
}
