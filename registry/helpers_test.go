package registry

// The helpers that the package's test files share; a helper that only
// one file needs stays in that file.
//
// Registries: loadRegistry is the one builder, from an environment map
// (never the process environment, so that tests run in parallel);
// tbrClient, payEnv and systemsEnv shape the map for the usual systems.
// Waits: testutil.Eventually.
// Calls: resilGet and its kin return a resilResult, the body read and
// closed; tbrGet and sendRead make one call under the caller's ctx.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// resilBound bounds every call that is expected to complete; calls expected
// to fail on a deadline use much shorter, explicit bounds.
const resilBound = 10 * time.Second

// resilResult is the outcome of one call: the status and whole body of the
// response, or the call's error.
type resilResult struct {
	status int
	body   string
	err    error
	took   time.Duration
}

func (r resilResult) String() string {
	if r.err != nil {
		return fmt.Sprintf("error after %v: %v", r.took, r.err)
	}
	return fmt.Sprintf("status %d after %v, body %q", r.status, r.took, resilShorten(r.body))
}

func resilShorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// resilGet sends GET path through c, bounded by d, and reads and closes the
// body.
func resilGet(c *Client, path string, d time.Duration) resilResult {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return resilGetCtx(ctx, c, path)
}

// resilGetCtx is resilGet under the caller's ctx, which must be bounded.
func resilGetCtx(ctx context.Context, c *Client, path string) resilResult {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return resilResult{err: err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return resilResult{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resilResult{status: resp.StatusCode, body: string(b), err: err, took: time.Since(start)}
}

// resilGo runs resilGet in a goroutine and delivers the result on the
// returned channel (buffered: the goroutine never blocks on it).
func resilGo(c *Client, path string, d time.Duration) <-chan resilResult {
	ch := make(chan resilResult, 1)
	go func() { ch <- resilGet(c, path, d) }()
	return ch
}

// resilRecv waits for one result, at most d.
func resilRecv(t *testing.T, ch <-chan resilResult, d time.Duration) resilResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("no result within %v", d)
		return resilResult{}
	}
}

// resilWaitParked waits, at most resilBound, until n requests are parked
// at g.
func resilWaitParked(t *testing.T, g *outboundtest.Hang, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), resilBound)
	defer cancel()
	if err := g.WaitFor(ctx, n); err != nil {
		t.Fatalf("waiting for %d requests parked at the gate (parked now: %d): %v", n, g.Waiting(), err)
	}
}

// resilAsError returns the *Error in err's chain, failing the test
// if there is none.
func resilAsError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) does not wrap a *Error", err, err)
	}
	return e
}

// resilOpen sends GET path and returns the response with its body still
// open; the caller closes it.
func resilOpen(t *testing.T, c *Client, path string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), resilBound)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// tbrSystem is the system that tbrClient declares and tbrError expects.
const tbrSystem = "inv"

// tbrClient declares the system "inv" at baseURL (INV_<key> for each
// entry of env), builds a registry with loadRegistry and returns the
// system's client.
func tbrClient(t *testing.T, baseURL string, env map[string]string, opts ...Option) *Client {
	t.Helper()
	full := map[string]string{"OUTBOUND_SYSTEMS": tbrSystem, "INV_BASE_URL": baseURL}
	for k, v := range env {
		full["INV_"+k] = v
	}
	return loadRegistry(t, full, opts...).MustClient(tbrSystem)
}

// tbrGet sends GET path through c.Do under ctx and reports how long Do
// took (to the response headers or the error).
func tbrGet(t *testing.T, ctx context.Context, c *Client, path string) (*http.Response, time.Duration, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := c.Do(req)
	return resp, time.Since(start), err
}

// tbrCtx is the test's outer bound: no call of these tests may run longer.
func tbrCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// tbrError asserts that err is or wraps an *Error of the system with the
// given observe.Op, and returns it.
func tbrError(t *testing.T, err error, op observe.Op) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one with Op %q", op)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) does not wrap *registry.Error", err, err)
	}
	if e.System != tbrSystem {
		t.Errorf("Error.System = %q, want %q", e.System, tbrSystem)
	}
	if e.Op != op {
		t.Fatalf("Error.Op = %q, want %q; error: %v", e.Op, op, err)
	}
	return e
}

// tbrTimeout asserts a timeout error of the given phase: its observe.Op, Timeout()
// on both the *Error and the error Do returned (a *url.Error), and the
// number of attempts sent.
func tbrTimeout(t *testing.T, err error, op observe.Op, attempts int) *Error {
	t.Helper()
	e := tbrError(t, err, op)
	if !e.Timeout() {
		t.Errorf("Error.Timeout() = false for Op %q", op)
	}
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("the error Do returned (%T) does not report Timeout()", err)
	}
	if e.Attempts != attempts {
		t.Errorf("Error.Attempts = %d, want %d", e.Attempts, attempts)
	}
	return e
}

// tbrFast are settings that keep retry tests short: local timeouts and a
// backoff of a few milliseconds.
func tbrFast(extra ...string) map[string]string {
	env := map[string]string{
		"CONNECT_TIMEOUT": "500ms", "TLS_HANDSHAKE_TIMEOUT": "1s", "READ_TIMEOUT": "2s", "CALL_TIMEOUT": "5s",
		"BACKOFF_BASE": "5ms", "BACKOFF_MAX": "20ms",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// tbrRead reads and closes resp's body.
func tbrRead(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

// holdPermit starts a call to /held that the gate keeps in flight, so
// that it holds one of c's permits, and returns once the gate has it. The
// channel gives the call's error after the gate opens.
func holdPermit(t *testing.T, c *Client, gate *outboundtest.Hang) <-chan error {
	t.Helper()
	held := make(chan error, 1)
	go func() {
		resp, _, err := tbrGet(t, tbrCtx(t, 10*time.Second), c, "/held")
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	if err := gate.WaitFor(tbrCtx(t, 5*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	return held
}

// systemsEnv is the environment of the systems of envs (name -> suffix
// -> value), declared in OUTBOUND_SYSTEMS. Calls fail fast: no retries,
// short timeouts, unless envs says otherwise.
func systemsEnv(envs map[string]map[string]string) map[string]string {
	names := make([]string, 0, len(envs))
	full := map[string]string{}
	for name, env := range envs {
		names = append(names, name)
		p := config.Prefix(name)
		base := map[string]string{"RETRIES": "0", "CONNECT_TIMEOUT": "1s", "TLS_HANDSHAKE_TIMEOUT": "2s", "READ_TIMEOUT": "3s", "CALL_TIMEOUT": "5s"}
		for k, v := range env {
			base[k] = v
		}
		for k, v := range base {
			full[p+"_"+k] = v
		}
	}
	full["OUTBOUND_SYSTEMS"] = strings.Join(names, ",")
	return full
}

// loadRegistry builds a registry from env (config.LoadEnv, never the
// process environment, so that its tests can run in parallel), as
// registrytest.New does for the tests outside the package (which this
// package cannot import). At the end of the test it reports any permit
// still held, a response body not closed, then closes the registry.
func loadRegistry(t *testing.T, env map[string]string, opts ...Option) *Registry {
	t.Helper()
	loaded, err := config.LoadEnv(env)
	if err != nil {
		t.Fatalf("LoadEnv: %v", err)
	}
	r, err := New(loaded, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		defer r.Close()
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			var held int64
			for _, st := range r.Status() {
				held += st.InFlight
			}
			if held == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d permits still held at the end of the test (a response body not closed?)", held)
				return
			}
		}
	})
	return r
}

// payEnv is a system "pay" at url with quick backoffs.
func payEnv(url string, kv ...string) map[string]string {
	env := map[string]string{
		"OUTBOUND_SYSTEMS": "pay", "PAY_BASE_URL": url,
		"PAY_BACKOFF_BASE": "1ms", "PAY_BACKOFF_MAX": "2ms",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env["PAY_"+kv[i]] = kv[i+1]
	}
	return env
}

// sendRead sends method url through send and returns the status (0 on an
// error), the header, the body read and closed, and the error.
func sendRead(ctx context.Context, t *testing.T, send func(*http.Request) (*http.Response, error), method, url string, h http.Header) (int, http.Header, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := send(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp.StatusCode, resp.Header, string(b), nil
}

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a
// slog handler (the handler serialises Handle, but the test reads it).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
