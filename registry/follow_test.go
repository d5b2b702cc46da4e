package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// followHop is what followServer saw of one hop.
type followHop struct {
	path, method, body                      string
	contentType, custom, auth, referer, idk string
}

// followServer answers /from?code=N with status N and Location /end,
// /noloc with a 302 without Location, and /end with 200 "end", and
// records every hop.
type followServer struct {
	*outboundtest.Upstream
	mu   sync.Mutex
	hops []followHop
}

func (s *followServer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.hops = append(s.hops, followHop{r.URL.Path, r.Method, string(b), r.Header.Get("Content-Type"),
		r.Header.Get("X-Custom"), r.Header.Get("Authorization"), r.Header.Get("Referer"), r.Header.Get("Idempotency-Key")})
	s.mu.Unlock()
	switch r.URL.Path {
	case "/from":
		var code int
		_, _ = fmt.Sscan(r.URL.Query().Get("code"), &code)
		w.Header().Set("Location", "/end")
		w.WriteHeader(code)
	case "/noloc":
		w.WriteHeader(http.StatusFound)
	case "/badloc":
		w.Header().Set("Location", "/%zz")
		w.WriteHeader(http.StatusFound)
	default:
		_, _ = io.WriteString(w, "end")
	}
}

func (s *followServer) take() []followHop {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hops
	s.hops = nil
	return h
}

// onlyReader hides strings.Reader's type, so that NewRequest sets no
// GetBody: a body that cannot be sent again.
type onlyReader struct{ io.Reader }

// TestFollowMatchesHTTPClient: the pipeline's own redirect engine (issue
// 11: http.Client cost four allocations per call) follows a same-origin
// redirect exactly as http.Client does: the method after 301/302/303 and
// 307/308, the body replayed or dropped, the body's headers dropped with
// it, the other headers copied, Referer set, a 307 of a body without
// GetBody and a 3xx without Location returned as they are. Every hop the
// server sees through Do is the hop it sees through a plain http.Client.
func TestFollowMatchesHTTPClient(t *testing.T) {
	// Not parallel: mtlsRegistry sets the environment.
	s := &followServer{}
	s.Upstream = outboundtest.NewUpstream(t, http.HandlerFunc(s.serve))
	c := mtlsRegistry(t, map[string]map[string]string{"follow": {"BASE_URL": s.URL, "RETRIES": "0"}}).MustClient("follow")
	raw := &http.Client{Transport: c.transport}
	type request struct {
		name, method string
		body         func() io.Reader
	}
	requests := []request{
		{"GET", http.MethodGet, nil},
		{"HEAD", http.MethodHead, nil},
		{"POST replayable", http.MethodPost, func() io.Reader { return strings.NewReader("payload") }},
		{"POST once", http.MethodPost, func() io.Reader { return onlyReader{strings.NewReader("payload")} }},
		{"PUT replayable", http.MethodPut, func() io.Reader { return strings.NewReader("payload") }},
	}
	for _, path := range []string{"/from?code=301", "/from?code=302", "/from?code=303", "/from?code=307", "/from?code=308", "/noloc"} {
		for _, rq := range requests {
			t.Run(path+" "+rq.name, func(t *testing.T) {
				send := func(do func(*http.Request) (*http.Response, error)) (int, string, []followHop) {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					var body io.Reader
					if rq.body != nil {
						body = rq.body()
					}
					req, err := http.NewRequestWithContext(ctx, rq.method, s.URL+path, body)
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", "text/plain")
					req.Header.Set("X-Custom", "kept")
					req.Header.Set("Authorization", "Bearer same-origin")
					req.Header.Set("Idempotency-Key", "k1")
					resp, err := do(req)
					if err != nil {
						t.Fatalf("%s %s: %v", rq.method, path, err)
					}
					b, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					return resp.StatusCode, string(b), s.take()
				}
				// The tests of this function run one by one: s sees
				// one call at a time.
				wantStatus, wantBody, wantHops := send(raw.Do)
				gotStatus, gotBody, gotHops := send(c.Do)
				if gotStatus != wantStatus || gotBody != wantBody {
					t.Errorf("Do: %d %q, http.Client: %d %q", gotStatus, gotBody, wantStatus, wantBody)
				}
				if !reflect.DeepEqual(gotHops, wantHops) {
					t.Errorf("hops through Do:\n%+v\nthrough http.Client:\n%+v", gotHops, wantHops)
				}
				if len(wantHops) == 0 {
					t.Fatal("the server saw nothing")
				}
			})
		}
	}
}

// TestFollowBadLocation: a redirect whose Location does not parse ends
// the call with an *Error of the transport stage carrying net/http's own
// message, as the http.Client engine did.
func TestFollowBadLocation(t *testing.T) {
	s := &followServer{}
	s.Upstream = outboundtest.NewUpstream(t, http.HandlerFunc(s.serve))
	c := mtlsRegistry(t, map[string]map[string]string{"follow": {"BASE_URL": s.URL, "RETRIES": "0"}}).MustClient("follow")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/badloc", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("Do: status %d, want an error", resp.StatusCode)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != observe.OpTransport || !strings.Contains(err.Error(), `failed to parse Location header "/%zz"`) {
		t.Errorf("Do: %v (%#v), want a transport *Error about the Location", err, e)
	}
	if got := c.Status().InFlight; got != 0 {
		t.Errorf("in flight after the call = %d, want 0", got)
	}
}
