package testutil

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Resp is one scripted answer.
type Resp struct {
	// Status is the status code; 0 means 200.
	Status int
	// Header is copied into the response headers.
	Header http.Header
	// Body is written after the headers. A non-empty body gets an
	// explicit Content-Length (unless Header sets one).
	Body string
	// Delay is waited before anything is written. If the client goes
	// away or the server stops first, the response is aborted.
	Delay time.Duration
	// Handler, if set, serves this step instead of the fields above
	// (after Delay), e.g. Resp{Handler: Reset()} or
	// Resp{Handler: SlowHeaders()}. The request body it sees has
	// already been recorded but can still be read.
	Handler http.Handler
}

// serve writes rs to w.
func (rs Resp) serve(w http.ResponseWriter, r *http.Request) {
	if rs.Delay > 0 && !Wait(r, rs.Delay) {
		abort()
	}
	if rs.Handler != nil {
		rs.Handler.ServeHTTP(w, r)
		return
	}
	status := rs.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := w.Header()
	for k, vs := range rs.Header {
		h[k] = append([]string(nil), vs...)
	}
	if rs.Body != "" && h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.Itoa(len(rs.Body)))
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, rs.Body)
}

// Request is what a [ScriptHandler] recorded about one request.
type Request struct {
	Seq    int // 1-based arrival order
	Method string
	Path   string // URL path
	Query  string // raw query, without '?'
	Header http.Header
	Body   []byte // as much of the body as could be read
}

// ScriptHandler answers requests from a fixed sequence of [Resp]s, in arrival
// order, repeating the last one forever, and records every request it sees.
// It is safe for concurrent use. Create it with [NewScriptHandler], or use
// [Script] to get it already mounted on a [Server].
type ScriptHandler struct {
	mu    sync.Mutex
	steps []Resp
	seen  []Request
}

// NewScriptHandler returns a handler answering with steps in order, the last
// one repeating. With no steps it always answers 200 with an empty body.
func NewScriptHandler(steps ...Resp) *ScriptHandler {
	if len(steps) == 0 {
		steps = []Resp{{}}
	}
	return &ScriptHandler{steps: append([]Resp(nil), steps...)}
}

// ServeHTTP records r and serves the next scripted step.
func (h *ScriptHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	i := len(h.seen)
	h.seen = append(h.seen, Request{
		Seq:    i + 1,
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		Header: r.Header.Clone(),
	})
	step := h.steps[min(i, len(h.steps)-1)]
	h.mu.Unlock()

	// A stalled upload is released by the Server's stop deadlines, so
	// this read cannot outlive the test.
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.seen[i].Body = body
	h.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))

	step.serve(w, r)
}

// Hits returns how many requests have arrived so far.
func (h *ScriptHandler) Hits() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// Received returns a copy of every request recorded so far, in arrival order.
func (h *ScriptHandler) Received() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Request, len(h.seen))
	for i, q := range h.seen {
		q.Header = q.Header.Clone()
		q.Body = bytes.Clone(q.Body)
		out[i] = q
	}
	return out
}

// ScriptServer is a [Server] serving a [ScriptHandler]; it has the methods of
// both (Conns, MaxActive, ... and Hits, Received).
type ScriptServer struct {
	*Server
	*ScriptHandler
}

// Script starts a [Server] on 127.0.0.1 that answers with steps in order,
// the last one repeating, e.g.
//
//	srv := testutil.Script(t, testutil.Resp{Status: 503}, testutil.Resp{Status: 503},
//		testutil.Resp{Status: 200, Body: "ok"})
//	// ... exercise the client against srv.URL ...
//	if srv.Hits() != 3 { ... }
func Script(t testing.TB, steps ...Resp) *ScriptServer {
	t.Helper()
	h := NewScriptHandler(steps...)
	return &ScriptServer{Server: NewServer(t, h), ScriptHandler: h}
}

// FailN returns a script of n responses with status failStatus followed by
// 200 "ok" (which then repeats): Script(t, FailN(2, 503)...).
func FailN(n, failStatus int) []Resp {
	steps := make([]Resp, 0, n+1)
	for range n {
		steps = append(steps, Resp{Status: failStatus})
	}
	return append(steps, Resp{Status: http.StatusOK, Body: "ok"})
}

// RetryAfterSeconds returns a header set with "Retry-After: <n>" (the
// delay-seconds form), for use in [Resp].Header.
func RetryAfterSeconds(n int) http.Header {
	return http.Header{"Retry-After": {strconv.Itoa(n)}}
}

// RetryAfterDate returns a header set with "Retry-After: <HTTP-date>" (the
// IMF-fixdate form, e.g. "Sun, 06 Nov 1994 08:49:37 GMT"). Sub-second
// precision is lost, as the format has none.
func RetryAfterDate(at time.Time) http.Header {
	return http.Header{"Retry-After": {at.UTC().Format(http.TimeFormat)}}
}

// LargeBodySize is a body size comfortably larger than the buffers net/http
// uses, so clients must actually drain it to reuse the connection.
const LargeBodySize = 64 << 10

// LargeBody returns a response with the given status and a size-byte body
// (use [LargeBodySize] for 64 KiB), with an explicit Content-Length. Useful to
// check that a client drains error bodies so the connection is reused.
func LargeBody(status, size int) Resp {
	return Resp{
		Status: status,
		Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:   strings.Repeat("e", size),
	}
}
