package registry

// The redirect policy (FOLLOW_REDIRECTS, MAX_REDIRECTS) against two real
// servers on 127.0.0.1, A (the system's BASE_URL) and B (another origin:
// same IP, another port). Helpers carry the prefix redir.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// redirSeen is one request a redirServer received.
type redirSeen struct {
	path   string
	method string
	header http.Header
}

// redirServer answers:
//
//	/chain/N    302 to /chain/N-1, and 200 "end" at /chain/0
//	/to?u=URL   the status in ?code (302 by default) to URL
//	anything else: 200 with the server's name as the body
//
// (also under /v1/).
//
// and records every request.
type redirServer struct {
	*outboundtest.Upstream
	name string
	mu   sync.Mutex
	seen []redirSeen
}

func redirNewServer(t *testing.T, name string) *redirServer {
	t.Helper()
	s := &redirServer{name: name}
	s.Upstream = outboundtest.NewUpstream(t, http.HandlerFunc(s.serve))
	return s
}

func (s *redirServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, redirSeen{path: r.URL.Path, method: r.Method, header: r.Header.Clone()})
	s.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/v1") // a base path, for TestRedirectUnderBasePath
	switch {
	case strings.HasPrefix(path, "/chain/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(path, "/chain/"))
		if n > 0 {
			// Relative: /v1/chain/2 goes to /v1/chain/1.
			http.Redirect(w, r, strconv.Itoa(n-1), http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "end")
	case path == "/to":
		code := http.StatusFound
		if c := r.URL.Query().Get("code"); c != "" {
			code, _ = strconv.Atoi(c)
		}
		http.Redirect(w, r, r.URL.Query().Get("u"), code)
	default:
		_, _ = io.WriteString(w, s.name)
	}
}

// requests returns what the server received so far.
func (s *redirServer) requests() []redirSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]redirSeen(nil), s.seen...)
}

func (s *redirServer) paths() []string {
	var out []string
	for _, r := range s.requests() {
		out = append(out, r.path)
	}
	return out
}

// to returns a path on A that redirects to target (with status code).
func redirTo(target string, code int) string {
	return "/to?" + url.Values{"u": {target}, "code": {strconv.Itoa(code)}}.Encode()
}

// redirResult is what a call returned: status, Location and body.
type redirResult struct {
	status   int
	location string
	body     string
}

// redirCall sends method path through do (c.Do or c.HTTPClient().Do) with
// the given headers.
func redirCall(t *testing.T, do func(*http.Request) (*http.Response, error), method, target string, h http.Header) redirResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"amount":1}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, target, err)
	}
	return redirResult{resp.StatusCode, resp.Header.Get("Location"), string(b)}
}

// redirClient builds the client of system "redir" with BASE_URL a and the
// given settings.
func redirClient(t *testing.T, a *redirServer, env map[string]string) *Client {
	t.Helper()
	e := map[string]string{"BASE_URL": a.URL}
	for k, v := range env {
		e[k] = v
	}
	return loadRegistry(t, systemsEnv(map[string]map[string]string{"redir": e})).MustClient("redir")
}

// TestRedirectDefault: the baseline follows at most 3 redirects and only
// to the base URL's scheme and host; a redirect elsewhere comes back to
// the caller as the 3xx response. Do and HTTPClient behave the same.
func TestRedirectDefault(t *testing.T) {
	t.Parallel()
	a, b := redirNewServer(t, "A"), redirNewServer(t, "B")
	c := redirClient(t, a, nil)
	if c.Config().FollowRedirects != "same-host" || c.Config().MaxRedirects != 3 {
		t.Fatalf("baseline redirect policy %q/%d, want same-host/3", c.Config().FollowRedirects, c.Config().MaxRedirects)
	}
	for name, do := range map[string]func(*http.Request) (*http.Response, error){"Do": c.Do, "HTTPClient": c.HTTPClient().Do} {
		t.Run(name, func(t *testing.T) {
			n := len(a.requests())
			if got := redirCall(t, do, http.MethodGet, "/chain/3", nil); got.status != 200 || got.body != "end" {
				t.Errorf("3 redirects: got %+v, want 200 end", got)
			}
			got := redirCall(t, do, http.MethodGet, "/chain/4", nil)
			if got.status != http.StatusFound || got.location != "/chain/0" {
				t.Errorf("4 redirects: got %+v, want the 4th 302 (to /chain/0)", got)
			}
			want := "/chain/3 /chain/2 /chain/1 /chain/0 /chain/4 /chain/3 /chain/2 /chain/1"
			if p := strings.Join(a.paths()[n:], " "); p != want {
				t.Errorf("A saw %s, want %s", p, want)
			}

			nb := len(b.requests())
			got = redirCall(t, do, http.MethodGet, redirTo(b.URL+"/x", http.StatusFound), nil)
			if got.status != http.StatusFound || got.location != b.URL+"/x" {
				t.Errorf("cross-host: got %+v, want the 302 to B", got)
			}
			// Same host name, another scheme: not followed either.
			httpsA := strings.Replace(a.URL, "http://", "https://", 1) + "/x"
			if got := redirCall(t, do, http.MethodGet, redirTo(httpsA, http.StatusFound), nil); got.status != http.StatusFound {
				t.Errorf("to https on the same host: got %+v, want the 302", got)
			}
			if len(b.requests()) != nb {
				t.Errorf("B saw a request under same-host")
			}
		})
	}
}

// TestRedirectNone: FOLLOW_REDIRECTS=none returns the first 3xx.
func TestRedirectNone(t *testing.T) {
	t.Parallel()
	a := redirNewServer(t, "A")
	c := redirClient(t, a, map[string]string{"FOLLOW_REDIRECTS": "none"})
	got := redirCall(t, c.Do, http.MethodGet, "/chain/1", nil)
	if got.status != http.StatusFound || got.location != "/chain/0" {
		t.Errorf("got %+v, want the 302", got)
	}
	if p := strings.Join(a.paths(), " "); p != "/chain/1" {
		t.Errorf("A saw %s, want /chain/1 alone", p)
	}
}

// TestRedirectMax: MAX_REDIRECTS exceeded returns the last 3xx; 0 returns
// the first.
func TestRedirectMax(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max       string
		follow    string
		path      string
		wantPaths string
		wantLoc   string
	}{
		{"1", "same-host", "/chain/2", "/chain/2 /chain/1", "/chain/0"},
		{"0", "same-host", "/chain/2", "/chain/2", "/chain/1"},
		{"2", "any", "/chain/5", "/chain/5 /chain/4 /chain/3", "/chain/2"},
	} {
		t.Run(tc.follow+"/"+tc.max, func(t *testing.T) {
			a := redirNewServer(t, "A")
			c := redirClient(t, a, map[string]string{"FOLLOW_REDIRECTS": tc.follow, "MAX_REDIRECTS": tc.max})
			got := redirCall(t, c.Do, http.MethodGet, tc.path, nil)
			if got.status != http.StatusFound || got.location != tc.wantLoc {
				t.Errorf("got %+v, want the 302 to %s", got, tc.wantLoc)
			}
			if p := strings.Join(a.paths(), " "); p != tc.wantPaths {
				t.Errorf("A saw %s, want %s", p, tc.wantPaths)
			}
		})
	}
}

// TestRedirectAnyStripsCredentials: FOLLOW_REDIRECTS=any follows to
// another host, but Authorization, Cookie and Idempotency-Key never reach
// it, nor any request after it (even back on A); a same-host redirect
// keeps them.
func TestRedirectAnyStripsCredentials(t *testing.T) {
	t.Parallel()
	a, b := redirNewServer(t, "A"), redirNewServer(t, "B")
	c := redirClient(t, a, map[string]string{"FOLLOW_REDIRECTS": "any", "RETRIES": "2"})
	creds := http.Header{
		"Authorization":   {"Bearer s3cret"},
		"Cookie":          {"session=abc"},
		"Idempotency-Key": {"key-1"},
	}
	sensitive := []string{"Authorization", "Cookie", "Idempotency-Key"}

	// net/http alone compares host names without ports, so it would hand
	// these to B (same 127.0.0.1, another port): the policy must strip
	// them itself.
	raw := &http.Client{Timeout: 5 * time.Second}
	defer raw.CloseIdleConnections()
	if got := redirCall(t, raw.Do, http.MethodGet, a.URL+redirTo(b.URL+"/raw", http.StatusFound), creds); got.body != "B" {
		t.Fatalf("plain net/http: got %+v", got)
	}
	rawSeen := b.requests()[0]
	t.Logf("plain net/http forwards to another port of the same host: Authorization %q, Cookie %q",
		rawSeen.header.Get("Authorization"), rawSeen.header.Get("Cookie"))

	for name, do := range map[string]func(*http.Request) (*http.Response, error){"Do": c.Do, "HTTPClient": c.HTTPClient().Do} {
		t.Run(name, func(t *testing.T) {
			nb, na := len(b.requests()), len(a.requests())
			// GET A -> B.
			if got := redirCall(t, do, http.MethodGet, redirTo(b.URL+"/get", http.StatusFound), creds); got.status != 200 || got.body != "B" {
				t.Fatalf("GET to B: got %+v, want 200 B", got)
			}
			// POST A -> B with 307: method and body kept, key dropped.
			if got := redirCall(t, do, http.MethodPost, redirTo(b.URL+"/post", http.StatusTemporaryRedirect), creds); got.status != 200 || got.body != "B" {
				t.Fatalf("POST to B: got %+v, want 200 B", got)
			}
			// A -> B -> A: back on A, still stripped.
			back := b.URL + redirTo(a.URL+"/back", http.StatusFound)
			if got := redirCall(t, do, http.MethodGet, redirTo(back, http.StatusFound), creds); got.status != 200 || got.body != "A" {
				t.Fatalf("A -> B -> A: got %+v, want 200 A", got)
			}
			bs := b.requests()[nb:]
			if len(bs) != 3 || bs[1].method != http.MethodPost {
				t.Fatalf("B saw %d requests (%v), want GET /get, POST /post, GET /to", len(bs), bs)
			}
			for _, r := range bs {
				for _, h := range sensitive {
					if v := r.header.Get(h); v != "" {
						t.Errorf("B got %s: %s %q", h, r.path, v)
					}
				}
			}
			var backSeen *redirSeen
			for _, r := range a.requests()[na:] {
				if r.path == "/back" {
					backSeen = &r
				}
			}
			if backSeen == nil {
				t.Fatal("A never saw /back")
			}
			for _, h := range sensitive {
				if v := backSeen.header.Get(h); v != "" {
					t.Errorf("A got %s back after a redirect through B: %q", h, v)
				}
			}

			// A -> A keeps them.
			n := len(a.requests())
			if got := redirCall(t, do, http.MethodGet, "/chain/1", creds); got.status != 200 {
				t.Fatalf("same host: got %+v", got)
			}
			last := a.requests()[n:]
			if len(last) != 2 || last[1].path != "/chain/0" {
				t.Fatalf("A saw %v, want /chain/1 /chain/0", last)
			}
			for _, h := range sensitive {
				if last[1].header.Get(h) != creds.Get(h) {
					t.Errorf("same-host redirect dropped %s", h)
				}
			}
		})
	}
}

// TestRedirectUnderBasePath checks that with a BASE_URL path a relative
// request resolves under it, a Location is resolved against the URL
// actually requested, and a same-host Location outside BASE_URL's path is
// the caller's answer, not followed (the caller's credentials are for the
// API under BASE_URL), through Do and through HTTPClient (whose requests
// stay relative inside net/http's redirect loop).
func TestRedirectUnderBasePath(t *testing.T) {
	t.Parallel()
	a := redirNewServer(t, "A")
	c := redirClient(t, a, map[string]string{"BASE_URL": a.URL + "/v1/"})
	for name, do := range map[string]func(*http.Request) (*http.Response, error){"Do": c.Do, "HTTPClient": c.HTTPClient().Do} {
		t.Run(name, func(t *testing.T) {
			n := len(a.requests())
			if got := redirCall(t, do, http.MethodGet, redirTo("/plain", http.StatusFound), nil); got.status != 302 || got.location != "/plain" {
				t.Errorf("Location out of /v1: got %+v, want the 302 itself", got)
			}
			if got := redirCall(t, do, http.MethodGet, "chain/2", nil); got.status != 200 || got.body != "end" {
				t.Errorf("chain under /v1: got %+v, want 200 end", got)
			}
			want := "/v1/to /v1/chain/2 /v1/chain/1 /v1/chain/0"
			if p := strings.Join(a.paths()[n:], " "); p != want {
				t.Errorf("A saw %s, want %s", p, want)
			}
		})
	}
}

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

// A same-origin redirect is followed through Do exactly as a plain
// http.Client follows it: the method after 301/302/303 and
// 307/308, the body replayed or dropped, the body's headers dropped with
// it, the other headers copied, Referer set, a 307 of a body without
// GetBody and a 3xx without Location returned as they are. Every hop the
// server sees through Do is the hop it sees through a plain http.Client.
func TestRedirectFollowedAsHTTPClientDoes(t *testing.T) {
	t.Parallel()
	s := &followServer{}
	s.Upstream = outboundtest.NewUpstream(t, http.HandlerFunc(s.serve))
	c := loadRegistry(t, systemsEnv(map[string]map[string]string{"follow": {"BASE_URL": s.URL, "RETRIES": "0"}})).MustClient("follow")
	raw := &http.Client{Transport: c.pol.Load().pool.transport}
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

// A redirect whose Location does not parse ends the call with an *Error
// of the transport stage carrying net/http's own message, as http.Client's
// engine does.
func TestRedirectWithBadLocationIsATransportError(t *testing.T) {
	t.Parallel()
	s := &followServer{}
	s.Upstream = outboundtest.NewUpstream(t, http.HandlerFunc(s.serve))
	c := loadRegistry(t, systemsEnv(map[string]map[string]string{"follow": {"BASE_URL": s.URL, "RETRIES": "0"}})).MustClient("follow")
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

// Do and HTTPClient() give one CALL_TIMEOUT to the whole call, redirects
// included, as http.Client.Timeout does: five hops of 400ms do not fit in
// a CALL_TIMEOUT of 1.7s.
func TestRedirectHopsShareOneCallTimeout(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !outboundtest.Wait(r, 400*time.Millisecond) {
			return
		}
		n := strings.TrimPrefix(r.URL.Path, "/hop/")
		if n == "0" {
			_, _ = io.WriteString(w, "end")
			return
		}
		next := map[string]string{"4": "3", "3": "2", "2": "1", "1": "0"}[n]
		http.Redirect(w, r, "/hop/"+next, http.StatusFound)
	}))
	c := tbrClient(t, srv.URL, tbrFast("CONNECT_TIMEOUT", "100ms", "TLS_HANDSHAKE_TIMEOUT", "500ms", "READ_TIMEOUT", "600ms",
		"CALL_TIMEOUT", "1700ms", "MAX_REDIRECTS", "5"))
	for _, tc := range []struct {
		name string
		do   func(*http.Request) (*http.Response, error)
	}{{"Do", c.Do}, {"HTTPClient", c.HTTPClient().Do}} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Requests()
			req, _ := http.NewRequestWithContext(tbrCtx(t, 10*time.Second), http.MethodGet, "/hop/4", nil)
			start := time.Now()
			resp, err := tc.do(req)
			took := time.Since(start)
			if err == nil {
				body := tbrRead(t, resp)
				t.Fatalf("got %d %q after %v and %d hops, want a call timeout at 1.7s", resp.StatusCode, body, took, srv.Requests()-before)
			}
			e := tbrError(t, err, observe.OpCallTimeout)
			t.Logf("%v after %d hops: %v", took.Round(time.Millisecond), srv.Requests()-before, e)
			if hops := srv.Requests() - before; hops > 5 {
				t.Errorf("%d hops sent, want at most 5", hops)
			}
		})
	}
}
