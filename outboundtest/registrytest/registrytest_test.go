package registrytest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

// New's report and CheckClean's verdicts. No test touches the process
// environment: all run in parallel. The faults seen through a registry
// client are tested beside the upstreams, in package outboundtest.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB that keeps what it is told.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

type fatal struct{}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.TB.Cleanup(f) }
func (r *recorder) Errorf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) { r.Errorf(format, a...); panic(fatal{}) }

func (r *recorder) said() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

func TestNewFailsWithTheReport(t *testing.T) {
	t.Parallel()
	rec := &recorder{TB: t}
	func() {
		defer func() {
			if _, ok := recover().(fatal); !ok {
				t.Error("New did not fail the test")
			}
		}()
		registrytest.New(rec, map[string]string{
			"OUTBOUND_SYSTEMS":         "inventory",
			"INVENTORY_BASE_URL":       "ftp://user:hunter2@inventory",
			"INVENTORY_CONECT_TIMEOUT": "1s",
			"INVENTORY_MAX_CONCURRENT": "-1",
		})
	}()
	out := rec.said()
	for _, want := range []string{"INVENTORY_BASE_URL", "INVENTORY_CONECT_TIMEOUT", "INVENTORY_MAX_CONCURRENT"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("the report shows a password:\n%s", out)
	}
}

// TestCheckClean leaves the pipeline in a state, then checks what
// CheckClean says of it.
func TestCheckClean(t *testing.T) {
	t.Parallel()
	// Each leave makes a call its way and returns what ends it.
	tests := []struct {
		name  string
		leave func(t *testing.T, c *registry.Client, up *outboundtest.Upstream) (end func())
		want  []string // in what CheckClean says; none: it says nothing
	}{
		{"clean", func(t *testing.T, c *registry.Client, _ *outboundtest.Upstream) func() {
			return call(t, c.HTTPClient(), "/", true)
		}, nil},
		{"a body left open", func(t *testing.T, c *registry.Client, _ *outboundtest.Upstream) func() {
			return call(t, c.HTTPClient(), "/", false)
		}, []string{"inventory: 1 permits held", "1 connections to"}},
		{"another client's connection", func(t *testing.T, _ *registry.Client, up *outboundtest.Upstream) func() {
			tr := &http.Transport{}
			call(t, &http.Client{Transport: tr}, up.URL, true)
			return tr.CloseIdleConnections
		}, []string{"1 connections to"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := outboundtest.NewUpstream(t, outboundtest.Healthy())
			reg := registrytest.New(t, map[string]string{"OUTBOUND_SYSTEMS": "inventory", "INVENTORY_BASE_URL": up.URL})
			end := tt.leave(t, reg.MustClient("inventory"), up)
			rec := &recorder{TB: t}
			registrytest.CheckClean(rec, reg, up)
			end()
			out := rec.said()
			if len(tt.want) == 0 && out != "" {
				t.Errorf("CheckClean said %q, want nothing", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("CheckClean said:\n%s\nwant %q", out, w)
				}
			}
			if _, err := reg.MustClient("inventory").Do(httptest.NewRequest(http.MethodGet, "/", nil)); !errors.Is(err, registry.ErrClosed) {
				t.Errorf("after CheckClean: %v, want the registry closed", err)
			}
		})
	}
}

// call sends GET url through c and, if consume, reads the body to its end
// and closes it; otherwise it leaves the body untouched. It returns what
// closes the body (or nothing).
func call(t *testing.T, c *http.Client, url string, consume bool) func() {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !consume {
		return func() { resp.Body.Close() }
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return func() {}
}
