package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// DefaultMaxBody is the largest response body [GetJSON] and [DoJSON]
// decode, 1 MiB, unless [WithMaxBody] says otherwise.
const DefaultMaxBody int64 = 1 << 20

// statusBodyMax is how much of an error response's body a [StatusError]
// keeps.
const statusBodyMax = 256

var (
	// ErrBodyTooLarge matches a call whose response body was larger than
	// the limit ([DefaultMaxBody] or [WithMaxBody]).
	ErrBodyTooLarge = errors.New("adapters: response body too large")
	// ErrBadPath matches a call given a path part that cannot be one path
	// segment: empty, "." or "..".
	ErrBadPath = errors.New("adapters: bad path part")
)

// Option configures one call of [GetJSON] or [DoJSON].
type Option interface {
	apply(*callOptions)
}

type callOptions struct {
	maxBody int64
	header  http.Header
	query   url.Values
}

type optionFunc func(*callOptions)

func (f optionFunc) apply(o *callOptions) { f(o) }

// WithMaxBody sets the largest response body decoded, in bytes; a larger
// body fails the call with [ErrBodyTooLarge]. n <= 0 keeps
// [DefaultMaxBody].
func WithMaxBody(n int64) Option {
	return optionFunc(func(o *callOptions) {
		if n > 0 {
			o.maxBody = n
		}
	})
}

// WithHeader adds a request header.
func WithHeader(key, value string) Option {
	return optionFunc(func(o *callOptions) { o.header.Add(key, value) })
}

// WithIdempotencyKey sets the Idempotency-Key header. The registry retries
// a non-idempotent method (POST, PATCH) only when it carries one, so the
// key must name the operation, not the attempt: the same order gives the
// same key, and the upstream recognises a replay.
func WithIdempotencyKey(key string) Option {
	return optionFunc(func(o *callOptions) { o.header.Set("Idempotency-Key", key) })
}

// WithQuery adds query parameters, after any the BASE_URL carries.
func WithQuery(q url.Values) Option {
	return optionFunc(func(o *callOptions) {
		for k, vs := range q {
			o.query[k] = append(o.query[k], vs...)
		}
	})
}

// Request is one JSON call of an adapter: what [DoJSON] sends and where
// it decodes the answer.
type Request struct {
	Method string   // "" is GET
	Path   []string // the path's parts after BASE_URL's, one segment each
	In     any      // encoded as the JSON body; nil: no body
	Out    any      // a 2xx answer is decoded into it; nil (or a 204): discarded
}

// GetJSON sends GET <BASE_URL>/<path parts, escaped> through c and decodes
// the JSON answer into out (nil: discard it). See [DoJSON], which takes
// options.
func GetJSON(ctx context.Context, c *registry.Client, path []string, out any) error {
	return DoJSON(ctx, c, Request{Method: http.MethodGet, Path: path, Out: out})
}

// DoJSON sends r.Method <BASE_URL>/<r.Path parts> through c with r.In
// encoded as the JSON body (nil: no body), and decodes a 2xx answer into
// r.Out (nil, or a 204: the body is discarded).
//
// Each path part is one segment, escaped with url.PathEscape, so "978/1 2"
// is sent as 978%2F1%202; an empty, "." or ".." part fails with
// [ErrBadPath] before any I/O. The body is sent from a bytes.Reader, so
// the registry can replay it when it retries (GET, or any method with
// [WithIdempotencyKey]).
//
// DoJSON returns nil, the registry's error when no response came, a
// [*StatusError] for a non-2xx status (also when the registry gave up on a
// temporary status it could not retry before the deadline: then it wraps
// the registry's error and carries the upstream's Retry-After), or an error matching
// [ErrBodyTooLarge] or wrapping the JSON decoder's error. The response
// body is always closed, which drains it (up to 256 KiB, 50ms at most).
func DoJSON(ctx context.Context, c *registry.Client, r Request, opts ...Option) error {
	method, path, in, out := r.Method, r.Path, r.In, r.Out
	if method == "" {
		method = http.MethodGet
	}
	o := callOptions{maxBody: DefaultMaxBody, header: http.Header{}, query: url.Values{}}
	for _, opt := range opts {
		opt.apply(&o)
	}
	u, err := buildURL(c.BaseURL(), path, o.query)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.Name(), method, err)
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s %s: encode request: %w", c.Name(), method, u.EscapedPath(), err)
		}
		body = bytes.NewReader(b) // sets GetBody: a retry replays it
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("%s %s %s: %w", c.Name(), method, u.EscapedPath(), err)
	}
	for k, vs := range o.header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}

	resp, err := c.Do(req)
	if err != nil {
		var re *registry.Error
		if errors.As(err, &re) && re.Op == observe.OpStatus && re.StatusCode != 0 {
			// The registry gave up on a temporary status it could not
			// retry in time: the caller sees the status and the
			// upstream's Retry-After, as for a response. (A caller
			// that cancelled during the wait gets its cancellation.)
			return &StatusError{System: c.Name(), Method: method, Path: u.EscapedPath(), StatusCode: re.StatusCode,
				RetryAfter: re.RetryAfter, HasRetryAfter: re.RetryAfter > 0, Err: err}
		}
		return err // an *registry.Error naming the system and the stage
	}
	// The registry's Close drains what is left (256 KiB, 50ms at most),
	// so the connection goes back to the pool.
	defer resp.Body.Close()
	where := c.Name() + " " + method + " " + u.EscapedPath()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newStatusError(c.Name(), method, u.EscapedPath(), resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, o.maxBody+1))
	if err != nil {
		return &readError{where: where, err: err}
	}
	if int64(len(data)) > o.maxBody {
		return fmt.Errorf("%s: %w: more than %s", where, ErrBodyTooLarge, byteSize(o.maxBody))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode response (%s): %w", where, byteSize(int64(len(data))), err)
	}
	return nil
}

// buildURL joins the escaped path parts to base's path and adds q to its
// query. The result is absolute, so the registry sends it as is.
func buildURL(base *url.URL, parts []string, q url.Values) (*url.URL, error) {
	raw := make([]string, len(parts))
	for i, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, fmt.Errorf("%w %d: %q", ErrBadPath, i+1, p)
		}
		raw[i] = url.PathEscape(p)
	}
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + "/" + strings.Join(parts, "/")
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + "/" + strings.Join(raw, "/")
	if len(q) > 0 {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += q.Encode()
	}
	u.Fragment = ""
	return &u, nil
}

// byteSize renders n as "1 MiB", "512 KiB" or "300 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
