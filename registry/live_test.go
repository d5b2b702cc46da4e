package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// configMap is a settings file laid out as Kubernetes mounts a ConfigMap
// volume: dir/settings -> ..data/settings, ..data -> a timestamped
// directory, and an update that writes a new directory and swaps ..data
// to it in one rename.
type configMap struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMap(t *testing.T, content string) *configMap {
	m := &configMap{t: t, dir: t.TempDir()}
	m.update(content)
	if err := os.Symlink(filepath.Join("..data", "settings"), filepath.Join(m.dir, "settings")); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *configMap) path() string { return filepath.Join(m.dir, "settings") }

// update swaps the volume to content, as the kubelet does.
func (m *configMap) update(content string) {
	m.t.Helper()
	m.n++
	ts := fmt.Sprintf("..2026_12_02_00_00_%02d.%d", m.n, m.n)
	if err := os.Mkdir(filepath.Join(m.dir, ts), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, ts, "settings"), []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		m.t.Fatal(err)
	}
}

// liveRegistry builds a registry of env with the settings file at path,
// looked at every 20ms.
func liveRegistry(t *testing.T, env map[string]string, path string, opts ...Option) *Registry {
	t.Helper()
	env[config.FileVar] = path
	r, err := fromEnvWithFile(path, env, nil, append(opts, WithReloadInterval(20*time.Millisecond)))
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// liveCalls numbers the calls of liveGet, each on a path of its own.
var liveCalls atomic.Int64

func liveGet(t *testing.T, c *Client) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("/call/%d", liveCalls.Add(1)), nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// flaky answers 503 to the first request of each path, 200 to the
// next: each call, on a path of its own, meets one 503. n counts the
// requests.
func flaky(t *testing.T) (*outboundtest.Upstream, *atomic.Int64) {
	var n atomic.Int64
	var seen sync.Map
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if _, again := seen.LoadOrStore(r.URL.Path, true); !again {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	return up, &n
}

// failable answers 500 while fail is set and 200 otherwise; reached
// counts its requests.
func failable(t *testing.T) (up *outboundtest.Upstream, fail *atomic.Bool, reached *atomic.Int64) {
	fail, reached = new(atomic.Bool), new(atomic.Int64)
	up = outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	return up, fail, reached
}

// reloader returns a function that makes s the settings file at path and
// has r apply it, failing the test if r refuses it.
func reloader(t *testing.T, r *Registry, path string) func(s string) {
	return func(s string) {
		t.Helper()
		if err := writeSettings(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := r.Reload(); err != nil {
			t.Fatalf("Reload: %v", err)
		}
	}
}

// pathGet makes one GET of p through c and reads the whole answer.
func pathGet(t *testing.T, c *Client, p string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p, nil)
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return err
}

// waitVersion waits, boundedly, for the registry to run version v.
func waitVersion(t *testing.T, r *Registry, v string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); r.Settings().Version != v; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("settings version %q after 10s, want %q (%+v)", r.Settings().Version, v, r.Settings())
		}
	}
}

func version(t *testing.T, content string) string {
	f, err := config.ParseFile("x", []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	return f.Version
}

// A ConfigMap-style swap of the settings file turning RETRIES from 0 to 2
// is seen by the watch and applied: a call to a 503-then-200 upstream
// that got the 503 now gets the 200 after one retry.
func TestSettingsFileSwapTurnsRetriesOn(t *testing.T) {
	t.Parallel()
	up, n := flaky(t)
	m := newConfigMap(t, "PAYMENTS_RETRIES=0\n")
	r := liveRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL,
		"PAYMENTS_BACKOFF_BASE": "1ms", "PAYMENTS_BACKOFF_MAX": "2ms"}, m.path())
	c := r.MustClient("payments")
	if status, err := liveGet(t, c); status != 503 || err != nil || n.Load() != 1 {
		t.Fatalf("RETRIES=0: %d %v after %d attempts, want the 503 of one", status, err, n.Load())
	}
	m.update("PAYMENTS_RETRIES=2\n")
	waitVersion(t, r, version(t, "PAYMENTS_RETRIES=2\n"))
	if status, err := liveGet(t, c); status != 200 || err != nil || n.Load() != 3 {
		t.Fatalf("RETRIES=2: %d %v after %d attempts in all, want 200 after a retry", status, err, n.Load())
	}
	if got := c.Config().Retries; got != 2 {
		t.Errorf("Config().Retries = %d, want 2", got)
	}
}

// A change with one bad variable is refused whole: nothing of it applies
// (not even its valid part), the report says why, and a later valid
// change applies.
func TestInvalidSettingsChangeIsRefusedWholeAndALaterOneApplies(t *testing.T) {
	t.Parallel()
	up, n := flaky(t)
	path := filepath.Join(t.TempDir(), "settings")
	write := func(s string) {
		if err := writeSettings(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("PAYMENTS_RETRIES=0\n")
	r := liveRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL,
		"PAYMENTS_BACKOFF_BASE": "1ms", "PAYMENTS_BACKOFF_MAX": "2ms"}, path)
	c := r.MustClient("payments")

	write("PAYMENTS_RETRIES=2\nPAYMENTS_READ_TIMEOUT=abc\n")
	err := r.Reload()
	var cerr *config.Error
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "PAYMENTS_READ_TIMEOUT=abc: not a duration") {
		t.Fatalf("Reload: %v, want the report naming PAYMENTS_READ_TIMEOUT", err)
	}
	st := r.Settings()
	if st.Refused == nil || !strings.Contains(st.Refused.Reason, "PAYMENTS_READ_TIMEOUT") || st.Refusals != 1 {
		t.Errorf("Settings: %+v, want the refusal with its reason", st)
	}
	if status, _ := liveGet(t, c); status != 503 || c.Config().Retries != 0 {
		t.Errorf("after the refused change: %d with RETRIES=%d, want the old settings (503, 0)", status, c.Config().Retries)
	}
	write("PAYMENTS_RETRIES=2\n")
	waitVersion(t, r, version(t, "PAYMENTS_RETRIES=2\n"))
	if st := r.Settings(); st.Refused != nil || st.Applied != 1 {
		t.Errorf("Settings after a valid change: %+v, want it applied and the refusal cleared", st)
	}
	before := n.Load()
	if status, _ := liveGet(t, c); status != 200 || n.Load()-before != 2 {
		t.Errorf("after the valid change: %d in %d attempts, want 200 after a retry", status, n.Load()-before)
	}
}

// A change of a setting fixed at start (a connection setting, a
// MAX_CONCURRENT above the pool's size) is refused whole, saying it needs
// a restart.
func TestSettingsFixedAtStartNeedARestart(t *testing.T) {
	t.Parallel()
	up, _ := flaky(t)
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAYMENTS_RETRIES=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := liveRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL}, path)
	for content, want := range map[string]string{
		"PAYMENTS_RETRIES=2\nPAYMENTS_MAX_CONCURRENT=64\n":                             "PAYMENTS_MAX_CONCURRENT changed: applied only at start",
		"PAYMENTS_RETRIES=2\nPAYMENTS_BASE_URL=http://127.0.0.1:1\n":                   "PAYMENTS_BASE_URL changed: applied only at start",
		"OUTBOUND_SYSTEMS=payments,inventory\nINVENTORY_BASE_URL=http://127.0.0.1:1\n": "adding or removing a system needs a restart",
	} {
		if err := writeSettings(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := r.Reload(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", content, err, want)
		}
	}
	if got := r.MustClient("payments").Config().Retries; got != 0 {
		t.Errorf("RETRIES %d after refused changes, want 0", got)
	}
}

// A change that does not touch the breaker keeps it: open stays open
// across a change of RETRIES, and its counts are kept across a change of
// READ_TIMEOUT. No new connection opens across a change that keeps the
// connection settings.
func TestSettingsChangeKeepsTheBreakerAndThePool(t *testing.T) {
	t.Parallel()
	up, fail, _ := failable(t)
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAYMENTS_RETRIES=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := liveRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL,
		"PAYMENTS_BREAKER_MIN_REQUESTS": "4", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "1m"}, path)
	write := reloader(t, r, path)
	c := r.MustClient("payments")
	for range 3 {
		if status, err := liveGet(t, c); status != 200 || err != nil {
			t.Fatalf("%d %v", status, err)
		}
	}
	write("PAYMENTS_RETRIES=0\nPAYMENTS_READ_TIMEOUT=5s\n")
	if st := c.Status(); st.BreakerCounts.Successes != 3 {
		t.Errorf("breaker counts after a change of READ_TIMEOUT: %+v, want the 3 successes kept", st.BreakerCounts)
	}
	if up.Conns() != 1 {
		t.Errorf("%d connections, want 1", up.Conns())
	}
	if status, _ := liveGet(t, c); status != 200 || up.Conns() != 1 {
		t.Errorf("a call after the change: %d, %d connections; want 200 on the one connection", status, up.Conns())
	}
	fail.Store(true)
	for range 4 {
		_, _ = liveGet(t, c)
	}
	if st := c.Status(); st.Breaker != "open" {
		t.Fatalf("breaker %s after 4 failures of 8, want open", st.Breaker)
	}
	write("PAYMENTS_RETRIES=2\nPAYMENTS_READ_TIMEOUT=5s\n")
	if _, err := liveGet(t, c); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("after a change of RETRIES: %v, want the breaker still open (ErrCircuitOpen)", err)
	}
}

// A change of the breaker's rule keeps its state and counts and judges
// the next failure by the new rule: 3 failures of a minimum of 10 keep it
// closed; with the minimum lowered to 4, the fourth failure opens it. The
// same holds for a route's own breaker.
func TestSettingsChangeOfTheBreakerRuleKeepsItsCounts(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAYMENTS_BREAKER_MIN_REQUESTS=10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := liveRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL,
		"PAYMENTS_RETRIES": "0", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "1m",
		"PAYMENTS_ROUTES": "export", "PAYMENTS_ROUTE_EXPORT_MATCH": "/export/", "PAYMENTS_ROUTE_EXPORT_BREAKER": "own"}, path)
	c := r.MustClient("payments")
	call := func(p string) error { return pathGet(t, c, p) }
	for range 3 {
		_ = call("/charges")
		_ = call("/export/1")
	}
	if st := c.Status(); st.Breaker != "closed" || st.BreakerCounts.Failures != 3 {
		t.Fatalf("after 3 failures of a minimum of 10: %s %+v, want closed with 3 failures", st.Breaker, st.BreakerCounts)
	}
	if err := writeSettings(path, []byte("PAYMENTS_BREAKER_MIN_REQUESTS=4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if st := c.Status(); st.Breaker != "closed" || st.BreakerCounts.Failures != 3 {
		t.Fatalf("after the change: %s %+v, want still closed with the 3 failures kept", st.Breaker, st.BreakerCounts)
	}
	_ = call("/charges")
	if err := call("/charges"); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("the system's breaker after a fourth failure with a minimum of 4: %v, want ErrCircuitOpen", err)
	}
	_ = call("/export/2")
	if err := call("/export/3"); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("the route's own breaker after a fourth failure with a minimum of 4: %v, want ErrCircuitOpen", err)
	}
}

// A change of the breaker's window, open timeout or probes at scope
// local keeps its state, the system's and a route's own: a closed
// breaker keeps its window's counts and is judged by the rule in force
// (3 failures of 10 stay closed; with a minimum of 3 and a new window
// they open it at once); an open one stays open, for the new open timeout
// from the change, then lets the new number of probes through.
func TestSettingsChangeOfTheBreakersWindowAndTimeoutKeepsItsState(t *testing.T) {
	t.Parallel()
	up, fail, reached := failable(t)
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAYMENTS_BREAKER_MIN_REQUESTS=10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := liveRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL,
		"PAYMENTS_RETRIES": "0", "PAYMENTS_BREAKER_OPEN_TIMEOUT": "1m", "PAYMENTS_BREAKER_FAILURE_RATIO": "0.5",
		"PAYMENTS_ROUTES": "export", "PAYMENTS_ROUTE_EXPORT_MATCH": "/export/", "PAYMENTS_ROUTE_EXPORT_BREAKER": "own"}, path)
	write := reloader(t, r, path)
	c := r.MustClient("payments")
	call := func(p string) error { return pathGet(t, c, p) }
	routeState := func() string {
		for _, rs := range c.Status().Routes {
			if rs.Name == "export" {
				return string(rs.Breaker)
			}
		}
		return "no route"
	}
	fail.Store(true)
	for range 3 {
		_ = call("/charges")
		_ = call("/export/1")
	}
	write("PAYMENTS_BREAKER_MIN_REQUESTS=10\nPAYMENTS_BREAKER_WINDOW=1m\nPAYMENTS_BREAKER_HALF_OPEN_PROBES=2\n")
	if st := c.Status(); st.Breaker != "closed" || st.BreakerCounts.Failures != 3 {
		t.Fatalf("after a change of window: %s %+v, want closed with the 3 failures kept", st.Breaker, st.BreakerCounts)
	}
	write("PAYMENTS_BREAKER_MIN_REQUESTS=3\nPAYMENTS_BREAKER_WINDOW=2m\nPAYMENTS_BREAKER_HALF_OPEN_PROBES=2\n")
	if st := c.Status(); st.Breaker != "open" {
		t.Errorf("3 failures of 3 taken over under a minimum of 3: %s, want open", st.Breaker)
	}
	if got := routeState(); got != "open" {
		t.Errorf("the route's own breaker, 3 failures of 3 under a minimum of 3: %s, want open", got)
	}
	before := reached.Load()
	write("PAYMENTS_BREAKER_MIN_REQUESTS=3\nPAYMENTS_BREAKER_WINDOW=2m\nPAYMENTS_BREAKER_HALF_OPEN_PROBES=2\nPAYMENTS_BREAKER_OPEN_TIMEOUT=2m\n")
	if err := call("/charges"); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("open, after a change of BREAKER_OPEN_TIMEOUT: %v, want ErrCircuitOpen", err)
	}
	if err := call("/export/2"); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("the route's, open, after a change of BREAKER_OPEN_TIMEOUT: %v, want ErrCircuitOpen", err)
	}
	if n := reached.Load() - before; n != 0 {
		t.Errorf("%d requests reached the upstream through the open breakers, want none", n)
	}
	// A shorter open timeout: probes go once it has passed since the
	// change, 2 of them, and their success closes the breakers.
	fail.Store(false)
	changed := time.Now()
	write("PAYMENTS_BREAKER_MIN_REQUESTS=3\nPAYMENTS_BREAKER_WINDOW=2m\nPAYMENTS_BREAKER_HALF_OPEN_PROBES=2\nPAYMENTS_BREAKER_OPEN_TIMEOUT=300ms\n")
	for _, p := range []string{"/charges", "/export/3"} {
		for deadline := time.Now().Add(10 * time.Second); call(p) != nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no probe let through 10s after a change to an open timeout of 300ms", p)
			}
		}
		if since := time.Since(changed); since < 300*time.Millisecond {
			t.Errorf("%s: a probe went %v after the change, before the new open timeout of 300ms", p, since)
		}
		_ = call(p) // the second probe closes it
	}
	if st := c.Status(); st.Breaker != "closed" || routeState() != "closed" {
		t.Errorf("after 2 successful probes of 2: the system's %s, the route's %s, want both closed", st.Breaker, routeState())
	}
}

// A change of connection settings (CONNECT_TIMEOUT, a READ_TIMEOUT above
// the pool's header timeout) builds a new pool: the call in flight
// finishes on the old one, the next calls open a connection of the new
// one, and the old pool's connections are closed once its calls are
// done. A READ_TIMEOUT raised from 1s to 3s lets a 1.5s answer through.
func TestSettingsChangeOfConnectionSettingsBuildsANewPool(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/held":
			close(arrived)
			<-release
		case "/slow":
			time.Sleep(1500 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "ok")
	}))
	path := filepath.Join(t.TempDir(), "settings")
	write := func(r *Registry, s string) {
		t.Helper()
		if err := writeSettings(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if r != nil {
			if err := r.Reload(); err != nil {
				t.Fatalf("Reload: %v", err)
			}
		}
	}
	write(nil, "PAYMENTS_CONNECT_TIMEOUT=500ms\nPAYMENTS_TLS_HANDSHAKE_TIMEOUT=500ms\nPAYMENTS_READ_TIMEOUT=1s\nPAYMENTS_CALL_TIMEOUT=3s\n")
	r := liveRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL,
		"PAYMENTS_RETRIES": "0"}, path)
	c := r.MustClient("payments")
	get := func(p string) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p, nil)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var timeout *Error
	if _, err := get("/slow"); !errors.As(err, &timeout) || timeout.Op != observe.OpReadTimeout {
		t.Fatalf("a 1.5s answer with READ_TIMEOUT 1s: %v, want a read timeout", err)
	}
	held := make(chan error, 1)
	go func() {
		status, err := get("/held")
		if err == nil && status != 200 {
			err = fmt.Errorf("status %d", status)
		}
		held <- err
	}()
	<-arrived
	write(r, "PAYMENTS_CONNECT_TIMEOUT=1s\nPAYMENTS_TLS_HANDSHAKE_TIMEOUT=1s\nPAYMENTS_READ_TIMEOUT=3s\nPAYMENTS_CALL_TIMEOUT=5s\n")
	close(release)
	if err := <-held; err != nil {
		t.Errorf("the call in flight across the change: %v, want 200", err)
	}
	// The held call's connection went back to the old pool: calls of the
	// new one cannot take it, and open exactly one of their own.
	before := up.Conns()
	for _, p := range []string{"/ok", "/ok", "/slow"} {
		if status, err := get(p); status != 200 || err != nil {
			t.Errorf("%s after the change (READ_TIMEOUT 3s): %d %v, want 200", p, status, err)
		}
	}
	if got := up.Conns() - before; got != 1 {
		t.Errorf("calls after the change opened %d connections, want 1: the new pool's", got)
	}
	r.Close()
	for deadline := time.Now().Add(10 * time.Second); up.OpenConns() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after Close, want the old pool's and the new one's closed", up.OpenConns())
		}
	}
}

// MAX_CONCURRENT lowered from 8 to 2 under 8 calls in flight fails none
// of them and admits no ninth, nor any call until fewer than 2 are in
// flight.
func TestSettingsLowerMaxConcurrentUnderLoad(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAYMENTS_MAX_CONCURRENT=8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := liveRegistry(t, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL, "PAYMENTS_RETRIES": "0"}, path)
	c := r.MustClient("payments")
	results := make(chan error, 8)
	for range 8 {
		go func() {
			status, err := liveGet(t, c)
			if err == nil && status != 200 {
				err = fmt.Errorf("status %d", status)
			}
			results <- err
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); up.InFlight() < 8; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls in flight, want 8", up.InFlight())
		}
	}
	if err := writeSettings(path, []byte("PAYMENTS_MAX_CONCURRENT=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if _, err := liveGet(t, c); !errors.Is(err, bulkhead.ErrFull) {
		t.Errorf("a ninth call: %v, want bulkhead.ErrFull", err)
	}
	close(release)
	for range 8 {
		if err := <-results; err != nil {
			t.Errorf("a call in flight failed: %v", err)
		}
	}
	if st := c.Status(); st.Limit != 2 || st.InFlight != 0 {
		t.Errorf("limit %d, in flight %d; want 2 and 0", st.Limit, st.InFlight)
	}
	if status, err := liveGet(t, c); status != 200 || err != nil {
		t.Errorf("a call after the 8 returned: %d %v", status, err)
	}
}

// BenchmarkSettingsPoll is what the watch costs each second while the
// file does not change: one read of a file of 40 lines and its hash.
func BenchmarkSettingsPoll(b *testing.B) {
	path := filepath.Join(b.TempDir(), "settings")
	content := strings.Repeat("# a comment line of a settings file\n", 39) + "PAYMENTS_RETRIES=1\n"
	if err := writeSettings(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	r, err := fromEnvWithFile(path, map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": "http://127.0.0.1:1"},
		nil, []Option{WithReloadInterval(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.reload(false); err != nil {
			b.Fatal(err)
		}
	}
}

// writeSettings replaces the settings file at path in one rename, as the
// kubelet and editors that save safely do: a watcher never reads it
// half-written (an empty file is valid settings: every baseline default).
func writeSettings(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// rateFleet is a Fleet that gives each system at RATE_SCOPE=fleet a
// quotaSpy, and every breaker its own.
type rateFleet struct {
	mu     sync.Mutex
	quotas map[string]*quotaSpy
}

func (f *rateFleet) Circuit(_ FleetSystem, local Circuit) (Circuit, error) { return local, nil }

func (f *rateFleet) Quota(sys FleetSystem, _ Quota) (Quota, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := &quotaSpy{rate: sys.Settings.Rate()}
	f.quotas[sys.Name] = q
	return q, nil
}

// quotaSpy stands for a fleet's quota: it lets every request go, counts
// them, and notes the rates it is given.
type quotaSpy struct {
	waits atomic.Int64
	mu    sync.Mutex
	rate  config.Rate
	set   []config.Rate
}

func (q *quotaSpy) Wait(context.Context, time.Duration) error { q.waits.Add(1); return nil }
func (q *quotaSpy) Pause(time.Time)                           {}
func (q *quotaSpy) ReportPauses(func(time.Time))              {}

func (q *quotaSpy) Status() observe.RateStatus {
	q.mu.Lock()
	defer q.mu.Unlock()
	return observe.RateStatus{Limit: q.rate.String(), Scope: "fleet", Share: q.rate.PerSecond(), Burst: q.rate.Burst}
}

func (q *quotaSpy) SetRate(r config.Rate) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rate = r
	q.set = append(q.set, r)
}

// A change of RATE_LIMIT and RATE_BURST of a system at RATE_SCOPE=fleet,
// and of a route's own limit, is applied, not refused: the fleet's quota
// is handed the new rate (Quota.SetRate) and stays the one the calls take
// their tokens from. Taking a route's own limit away at scope fleet
// still needs a restart.
func TestSettingsChangeOfAFleetRateIsHandedToTheFleet(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	path := filepath.Join(t.TempDir(), "settings")
	route := "PAYMENTS_ROUTE_CHARGE_RATE_LIMIT=5/s\n"
	if err := writeSettings(path, []byte("PAYMENTS_RATE_LIMIT=100/s\n"+route), 0o644); err != nil {
		t.Fatal(err)
	}
	fl := &rateFleet{quotas: map[string]*quotaSpy{}}
	r := liveRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL, "PAYMENTS_RATE_SCOPE": "fleet",
		"PAYMENTS_ROUTES": "charge", "PAYMENTS_ROUTE_CHARGE_MATCH": "POST /charge",
		"OUTBOUND_FLEET_REDIS_URL": "redis://127.0.0.1:1", "OUTBOUND_FLEET_NAMESPACE": "test",
	}, path, WithFleet(fl), WithReloadInterval(time.Hour))
	c := r.MustClient("payments")
	q, rq := fl.quotas["payments"], fl.quotas["payments.charge"]
	if q == nil || rq == nil {
		t.Fatalf("the fleet gave quotas to %v, want payments and payments.charge", slices.Sorted(maps.Keys(fl.quotas)))
	}
	if err := writeSettings(path, []byte("PAYMENTS_RATE_LIMIT=30/s\nPAYMENTS_RATE_BURST=7\nPAYMENTS_ROUTE_CHARGE_RATE_LIMIT=8/s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err != nil {
		t.Fatalf("Reload of RATE_LIMIT 100/s -> 30/s and a route's 5/s -> 8/s at RATE_SCOPE=fleet: %v, want it applied", err)
	}
	for _, tc := range []struct {
		q    *quotaSpy
		want config.Rate
	}{{q, config.Rate{Events: 30, Per: time.Second, Burst: 7}}, {rq, config.Rate{Events: 8, Per: time.Second, Burst: 1}}} {
		tc.q.mu.Lock()
		set := slices.Clone(tc.q.set)
		tc.q.mu.Unlock()
		if len(set) != 1 || set[0] != tc.want {
			t.Errorf("a fleet's quota was handed %v, want [%v]", set, tc.want)
		}
	}
	if _, err := liveGet(t, c); err != nil {
		t.Fatal(err)
	}
	if n := q.waits.Load(); n != 1 {
		t.Errorf("the fleet's quota gave %d tokens to a call after the change, want 1: the quota was replaced", n)
	}
	if st := c.Status().Rate; st == nil || st.Limit != "30/s" || st.Scope != "fleet" {
		t.Errorf("Status().Rate after the change: %+v, want the fleet's quota at 30/s", st)
	}
	if err := writeSettings(path, []byte("PAYMENTS_RATE_LIMIT=30/s\nPAYMENTS_RATE_BURST=7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "PAYMENTS_ROUTES") {
		t.Errorf("Reload taking a route's own limit away at scope fleet: %v, want it refused as needing a restart", err)
	}
}

// fixedRateFleet gives quotas without SetRate, as a fleet module built
// before live rate changes does.
type fixedRateFleet struct{ rateFleet }

// fixedQuota is a quotaSpy whose rate cannot change while it runs.
type fixedQuota struct{ q *quotaSpy }

func (q fixedQuota) Wait(ctx context.Context, d time.Duration) error { return q.q.Wait(ctx, d) }
func (q fixedQuota) Pause(until time.Time)                           { q.q.Pause(until) }
func (q fixedQuota) ReportPauses(f func(time.Time))                  { q.q.ReportPauses(f) }
func (q fixedQuota) Status() observe.RateStatus                      { return q.q.Status() }

func (f *fixedRateFleet) Quota(sys FleetSystem, local Quota) (Quota, error) {
	q, err := f.rateFleet.Quota(sys, local)
	return fixedQuota{q.(*quotaSpy)}, err
}

// A fleet whose quotas cannot take a new rate (a service requiring a fleet
// module older than the core) still builds and runs: a change of
// RATE_LIMIT at RATE_SCOPE=fleet is refused as needing a restart, and the
// rest of the change with it, as any such change is.
func TestSettingsChangeOfARateAFleetCannotTakeNeedsARestart(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAYMENTS_RATE_LIMIT=100/s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fl := &fixedRateFleet{rateFleet{quotas: map[string]*quotaSpy{}}}
	r := liveRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL, "PAYMENTS_RATE_SCOPE": "fleet",
		"OUTBOUND_FLEET_REDIS_URL": "redis://127.0.0.1:1", "OUTBOUND_FLEET_NAMESPACE": "test",
	}, path, WithFleet(fl), WithReloadInterval(time.Hour))
	if err := writeSettings(path, []byte("PAYMENTS_RATE_LIMIT=30/s\nPAYMENTS_RETRIES=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := r.Reload()
	if err == nil || !strings.Contains(err.Error(), "PAYMENTS_RATE_LIMIT") {
		t.Fatalf("Reload of RATE_LIMIT with a quota that cannot take it: %v, want it refused naming PAYMENTS_RATE_LIMIT", err)
	}
	if st := r.MustClient("payments").Status().Rate; st == nil || st.Limit != "100/s" {
		t.Errorf("Status().Rate after the refused change: %+v, want 100/s still", st)
	}
}

// The same for a route's own limit at scope fleet: its variables are the
// route's, not the system's, and the change is refused, not applied to a
// quota that cannot take it.
func TestSettingsChangeOfARouteRateAFleetCannotTakeNeedsARestart(t *testing.T) {
	t.Parallel()
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAYMENTS_RATE_LIMIT=100/s\nPAYMENTS_ROUTE_CHARGE_RATE_LIMIT=5/s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fl := &fixedRateFleet{rateFleet{quotas: map[string]*quotaSpy{}}}
	r := liveRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": up.URL, "PAYMENTS_RATE_SCOPE": "fleet",
		"PAYMENTS_ROUTES": "charge", "PAYMENTS_ROUTE_CHARGE_MATCH": "POST /charge",
		"OUTBOUND_FLEET_REDIS_URL": "redis://127.0.0.1:1", "OUTBOUND_FLEET_NAMESPACE": "test",
	}, path, WithFleet(fl), WithReloadInterval(time.Hour))
	if err := writeSettings(path, []byte("PAYMENTS_RATE_LIMIT=100/s\nPAYMENTS_ROUTE_CHARGE_RATE_LIMIT=8/s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "PAYMENTS_ROUTES") {
		t.Fatalf("Reload of a route's limit with a quota that cannot take it: %v, want it refused naming PAYMENTS_ROUTES", err)
	}
}
