package outboundtest

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// Request is what a [Script] recorded of one request.
type Request struct {
	Seq         int    // arrival order, from 1
	Method      string // GET, POST, ...
	Path        string // the URL path, unescaped
	EscapedPath string // the URL path as sent ("/stock/978%2F0")
	Query       string // the raw query, without '?'
	Header      http.Header
	Body        []byte // as much of the body as could be read
}

// Script answers requests with a sequence of [Reply]s in arrival order,
// the last one repeating, and records every request. It is safe for
// concurrent use.
type Script struct {
	mu    sync.Mutex
	steps []Reply
	seen  []Request
}

// NewScript returns a Script answering with steps in order, the last one
// repeating; with no steps it answers 200 with an empty body.
//
//	s := outboundtest.NewScript(outboundtest.Reply{Status: 503}, outboundtest.Healthy())
//	up := outboundtest.NewUpstream(t, s) // 503, then 200 "ok" forever
func NewScript(steps ...Reply) *Script {
	if len(steps) == 0 {
		steps = []Reply{{}}
	}
	return &Script{steps: append([]Reply(nil), steps...)}
}

// ServeHTTP records r and serves the next step.
func (s *Script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.seen)
	s.seen = append(s.seen, Request{
		Seq:         i + 1,
		Method:      r.Method,
		Path:        r.URL.Path,
		EscapedPath: r.URL.EscapedPath(),
		Query:       r.URL.RawQuery,
		Header:      r.Header.Clone(),
	})
	step := s.steps[min(i, len(s.steps)-1)]
	s.mu.Unlock()

	// A stalled upload is released by the Upstream's stop deadlines, so
	// this read cannot outlive the test.
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.seen[i].Body = body
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))

	step.ServeHTTP(w, r)
}

// Hits returns how many requests have arrived.
func (s *Script) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// Received returns a copy of every request recorded, in arrival order.
func (s *Script) Received() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.seen))
	for i, q := range s.seen {
		q.Header = q.Header.Clone()
		q.Body = bytes.Clone(q.Body)
		out[i] = q
	}
	return out
}
