// Origin: a system's requests, and its credentials, stay on its
// BASE_URL: one same-origin check, one list of credential headers, one
// rule for userinfo, and the path rules that keep a request under
// BASE_URL's path. The entry applies them to the caller's requests and
// the redirect stage to every hop, so the two cannot disagree. The rules
// are documented in the package doc.

package registry

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/redact"
)

// sameOrigin reports whether a and b have the same origin: scheme and host name
// compared case-insensitively, ports with the scheme's default when none
// is given. It does not allocate, and a request written with BASE_URL's
// own scheme and host (the usual absolute URL) costs two comparisons of
// strings, no parsing of either host.
func sameOrigin(a, b *url.URL) bool {
	if a.Host == b.Host && a.Scheme == b.Scheme {
		return true
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
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

// urlString renders u's origin as scheme://host:port, with the scheme's
// default port and nothing else: no userinfo, path or query to leak.
func urlString(u *url.URL) string {
	return redact.URL(strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port(u)))
}

// credentialHeaders are the request headers that carry a caller's identity or
// a promise to one system: they never follow a request to another origin,
// nor to a path outside BASE_URL's. The list is compared case-
// insensitively (canonical header keys).
var credentialHeaders = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Cookie2",
	"Www-Authenticate", "Proxy-Authenticate",
	"Idempotency-Key",
	"X-Api-Key", "Api-Key", "X-Auth-Token",
}

// stripCredentials deletes the [credentialHeaders] from h, and the call's time
// budget (capbudget.Header): another host has no use for either.
func stripCredentials(h http.Header) {
	for _, k := range credentialHeaders {
		delete(h, k)
	}
	delete(h, capbudget.Header)
}

// setBasicAuth is the one userinfo rule: a URL's userinfo is sent as Basic
// auth, unless the request already carries an Authorization (the
// caller's own wins). It reports whether it set one. h must be the
// request's own header map.
func setBasicAuth(h http.Header, u *url.Userinfo) bool {
	if u == nil || h.Get("Authorization") != "" {
		return false
	}
	pw, _ := u.Password()
	r := http.Request{Header: h}
	r.SetBasicAuth(u.Username(), pw)
	return true
}

// escapesBase reports whether a relative path climbs above its root with
// "..": joined to BASE_URL's path, "../admin" or "a/../../x" would leave
// it. Paths built from user input ("/stock/"+isbn) must not reach another
// API of the same host.
func escapesBase(p string) bool {
	if !strings.Contains(p, "..") {
		return false
	}
	depth := 0
	for p != "" {
		var seg string
		seg, p, _ = strings.Cut(p, "/")
		switch {
		case seg == "" || seg == ".":
		case seg == "..":
			if depth--; depth < 0 {
				return true
			}
		case strings.HasPrefix(seg, "..;") || strings.HasPrefix(seg, `..\`):
			// "..;" (Tomcat, Spring) and "..\" (proxies that turn \
			// into /) climb too on some servers: refuse them outright.
			return true
		default:
			depth++
		}
	}
	return false
}

// resolveRef joins a relative URL to base: the path is appended to the base
// path, and the query is the base query followed by the request's.
func resolveRef(base, rel *url.URL) *url.URL {
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + "/" + strings.TrimPrefix(rel.Path, "/")
	if rel.RawPath != "" || base.RawPath != "" {
		u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + "/" + strings.TrimPrefix(rel.EscapedPath(), "/")
	}
	switch {
	case base.RawQuery == "":
		u.RawQuery = rel.RawQuery
	case rel.RawQuery != "":
		u.RawQuery = base.RawQuery + "&" + rel.RawQuery
	}
	u.Fragment = ""
	return &u
}

// underBase reports whether u is base's origin and its path lies under base's
// path ("/v1/up" under "/v1"; "/admin" is not): a redirect that leaves it
// goes to another API of the same host. A base without a path ("/" or "")
// holds every path of its origin. Paths compare as cleaned, so
// "/v1/../admin" is not under "/v1".
func underBase(u, base *url.URL) bool {
	if !sameOrigin(u, base) {
		return false
	}
	root := strings.TrimSuffix(base.EscapedPath(), "/")
	if root == "" {
		return true
	}
	p := cleaned(u.EscapedPath())
	return p == root || strings.HasPrefix(p, root+"/")
}

// cleaned resolves "." and ".." segments of an absolute path, as a server
// would, keeping a trailing slash.
func cleaned(p string) string {
	if !strings.Contains(p, ".") && !strings.Contains(strings.ToLower(p), "%2e") {
		return p
	}
	out := make([]string, 0, 8)
	for seg := range strings.SplitSeq(strings.TrimPrefix(p, "/"), "/") {
		switch dots := strings.ToLower(strings.ReplaceAll(seg, "%2e", ".")); {
		case dots == ".":
		case strings.HasPrefix(dots, ".."):
			// "..", and "..;" or "..\" which climb on some servers.
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	return "/" + strings.Join(out, "/")
}
