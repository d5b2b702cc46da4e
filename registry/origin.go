package registry

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// ErrOtherOrigin matches a request whose absolute URL is not BASE_URL's
// origin (scheme, host and port): a system is one origin, so that its
// credentials, X-Time-Budget, breaker and bulkhead are never spent on
// another host. Nothing is sent. Use a relative URL, or the system that
// owns the other host. Redirects are not requests of the caller: they
// follow FOLLOW_REDIRECTS.
var ErrOtherOrigin = errors.New("outbound: request origin is not BASE_URL's")

// OriginError is the cause of a request refused with [ErrOtherOrigin]: it
// names both origins, as scheme://host:port, redacted.
type OriginError struct {
	Got  string // the request's origin
	Base string // BASE_URL's origin
}

func (e *OriginError) Error() string {
	return "origin " + e.Got + " is not BASE_URL's " + e.Base
}

// Is makes an OriginError match [ErrOtherOrigin].
func (e *OriginError) Is(target error) bool { return target == ErrOtherOrigin }

// otherOrigin is the refusal of req, whose absolute URL leaves BASE_URL's
// origin (refuse checks that). A relative URL is resolved against
// BASE_URL and always passes.
func (c *Client) otherOrigin(req *http.Request) error {
	return &Error{System: c.name, Op: observe.OpRequest, Method: req.Method, URL: redactedURL(req),
		Err: &OriginError{Got: origin(req.URL), Base: origin(c.base)}}
}

// origin renders u's scheme://host:port, with the scheme's default port,
// and nothing else: no userinfo, path or query to leak.
func origin(u *url.URL) string {
	return config.RedactURL(strings.ToLower(u.Scheme) + "://" + hostPort(u))
}

// sameOrigin is sameHost without allocating, for the hot path: scheme and
// host name compared case-insensitively, ports with the scheme's default.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && portOf(a) == portOf(b)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch {
	case strings.EqualFold(u.Scheme, "https"):
		return "443"
	case strings.EqualFold(u.Scheme, "http"):
		return "80"
	}
	return ""
}
