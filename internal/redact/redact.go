// Package redact hides secrets in URLs and makes untrusted text safe to
// print on one line.
//
// Two policies, one per kind of URL:
//
//   - [BaseURL], for a system's configured BASE_URL: userinfo, every query
//     value and the fragment are replaced by [Mark]. A BASE_URL is written
//     by an operator, often with a key in it, and no list of secret names
//     can be complete (token, jwt, bearer, otp, hash, private, ...).
//   - [URL], for request URLs: userinfo and the fragment are replaced, and
//     every query value whose name is not on a short list of names known
//     to be safe ([safeParams]: page, limit, sort, ...), so a log line
//     still shows which page was asked for.
//
// Text that does not parse as a URL is redacted more, never less: all
// between the scheme and the last '@', and all from the first '?' or '#';
// without an '@', all after the scheme ("redis://default:S3cret", whose
// password url.Parse took for a bad port, shows as "redis://REDACTED").
// [BaseURL] shows text without a scheme and "//" only when it is a bare
// host and port, and otherwise nothing of it.
// [BaseURL] also treats an '@' that url.Parse left in the path as the end
// of userinfo ([UserinfoOutsideAuthority]). [Printable] quotes text holding control characters (CR, LF, ANSI
// escapes), so a value cannot forge a line of a report or a terminal.
//
// Every function is safe for concurrent use and never panics.
package redact

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mark replaces every secret.
const Mark = "REDACTED"

// safeParams are the query parameter names whose values [URL] shows:
// paging, sorting and shaping of a response, never credentials. Names
// compare case-insensitively.
var safeParams = map[string]bool{
	"page": true, "per_page": true, "page_size": true, "pagesize": true,
	"limit": true, "offset": true, "sort": true, "order": true,
	"fields": true, "expand": true, "include": true, "format": true,
	"lang": true, "locale": true, "version": true, "api-version": true,
	"region": true,
}

// schemeRE matches a leading scheme and its "//": "https://".
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// URL returns s with its userinfo, its fragment and the query values of
// every name not known to be safe replaced by [Mark]. For request URLs.
func URL(s string) string {
	return redact(s, false, func(name string) bool { return !safeParams[strings.ToLower(name)] })
}

// BaseURL returns s with its userinfo, its fragment and every query value
// replaced by [Mark]. For a URL an operator configures: a system's
// BASE_URL, the fleet's Redis URL.
//
// Such a value is shown only where a password can be told apart from the
// rest: text that starts with a scheme and "//" (its userinfo is then
// hidden even when it does not parse), or a bare host and port
// ([IsHostPort]: "pay.internal:8443", a scheme forgotten; a host and a
// port are no secret). Anything else is replaced whole by [Mark]: it may
// be a password pasted alone ("S3cret", ":S3cret") or after a scheme
// without "//" ("redis:S3cret", which url.Parse reads as an opaque URL).
func BaseURL(s string) string {
	switch {
	case s == "" || IsHostPort(s):
		return s
	case schemeRE.MatchString(s):
		return redact(s, true, func(string) bool { return true })
	}
	return Mark
}

// RedisURL is [BaseURL] for the fleet's Redis URL, but for the values of
// its cluster= and of each addr= that is a host and port ([IsHostPort]):
// another node of a Redis Cluster is no secret, and an operator reading
// Status needs to see which nodes the pod was given.
func RedisURL(s string) string {
	shown := BaseURL(s)
	u, err := url.Parse(s)
	if _, hidden := hiddenUserinfo(s); shown == s || err != nil || hidden || u.RawQuery == "" {
		return shown
	}
	q, err := url.ParseQuery(u.RawQuery)
	v, err2 := url.Parse(shown)
	if err != nil || err2 != nil {
		return shown
	}
	sq := v.Query()
	for i, a := range q["addr"] {
		if IsHostPort(a) && i < len(sq["addr"]) {
			sq["addr"][i] = a
		}
	}
	if c := q["cluster"]; len(c) == 1 && (strings.EqualFold(c[0], "true") || strings.EqualFold(c[0], "false")) {
		sq["cluster"] = c
	}
	v.RawQuery = sq.Encode()
	return v.String()
}

// hostPortRE is a host name, an IPv4 address or a bracketed IPv6 address,
// a port, and optionally a path without '?', '#' or '@'.
var hostPortRE = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}(?:/[^?#@]*)?$`)

// IsHostPort reports whether s is a host and a port without a scheme
// ("pay.internal:8443", "10.0.0.7:80", "[::1]:8443"), optionally followed
// by a path ("pay.internal:8443/v1"): a URL whose scheme was forgotten,
// which url.Parse would read as scheme "pay.internal". It holds no
// userinfo, query or fragment, so it holds no secret a URL would.
func IsHostPort(s string) bool { return hostPortRE.MatchString(s) }

// UserinfoOutsideAuthority reports whether s holds an '@' that url.Parse
// did not take as the end of userinfo because a character before it ('/',
// '?' or '#', unencoded in a password) ended the authority first:
// "https://user:12/secret@host/v1" parses as host "user", port 12. Such a
// URL names the wrong host and shows a password as if it were a path.
//
// The test: s has no userinfo as parsed, and the text between "//" and
// its last '@' holds a ':' (user:password) and one of "/?#". An '@' that
// really belongs to the path or the query after a port
// ("https://h:8443/v1?mail=a@b") looks the same; write it as %40.
func UserinfoOutsideAuthority(s string) bool {
	_, ok := hiddenUserinfo(s)
	return ok
}

// hiddenUserinfo returns the end of the scheme's "//" and whether s holds
// userinfo outside its parsed authority (see UserinfoOutsideAuthority).
func hiddenUserinfo(s string) (start int, ok bool) {
	start = len(schemeRE.FindString(s))
	if start == 0 {
		return 0, false
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return start, false
	}
	at := strings.LastIndexByte(s, '@')
	if at < start {
		return start, false
	}
	cand := s[start:at]
	return start, strings.Contains(cand, ":") && strings.ContainsAny(cand, "/?#")
}

// redact hides userinfo, the fragment and the values of the query names
// secret says are secret. With strict, text that holds userinfo outside
// its parsed authority (see UserinfoOutsideAuthority) is redacted as if
// it did not parse: a configured BASE_URL is refused for it, and its
// password must not show. A request URL that parses is shown as what was
// requested (host, then a path that may well hold an '@').
func redact(s string, strict bool, secret func(name string) bool) string {
	u, err := url.Parse(s)
	start, hidden := hiddenUserinfo(s)
	if err != nil || (strict && hidden) {
		// In text that does not parse, userinfo may hold any byte ('/',
		// '?' and '#' included): redact everything between the scheme and
		// the last '@'. Without an '@' there is no telling a host from a
		// password ("redis://default:S3cret" fails on its port): all
		// after the scheme goes.
		at := strings.LastIndexByte(s, '@')
		if at < start {
			return s[:start] + Mark
		}
		s = s[:start] + Mark + s[at:]
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i] + "?" + Mark
		}
		return s
	}
	if u.Opaque == "" && u.User == nil && u.RawQuery == "" && u.Fragment == "" {
		return s // nothing to hide: shown as written ("redis://" stays)
	}
	if u.Opaque != "" {
		// "user:pass@host" parses as scheme "user" with opaque "pass@host":
		// the scheme is then the user name, so it goes too.
		if at := strings.LastIndexByte(u.Opaque, '@'); at >= 0 {
			u.Scheme, u.Opaque = "", Mark+u.Opaque[at:]
		} else {
			u.Opaque = Mark
		}
	}
	if u.User != nil {
		u.User = url.User(Mark)
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = Mark
		} else {
			changed := false
			for k, vs := range q {
				if secret(k) {
					for i := range vs {
						vs[i] = Mark
					}
					changed = true
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
		}
	}
	if u.Fragment != "" {
		u.Fragment = Mark
	}
	return u.String()
}

// MaxShown is how many bytes of a value [Clip] keeps.
const MaxShown = 200

// Clip returns s when it is at most [MaxShown] bytes long, and otherwise
// its first MaxShown bytes (cut on a rune boundary), an ellipsis and how
// long it was: "aaaa… (1048576 bytes)". Every report shows a value
// through Clip, so that a huge value cannot make a huge report. Clip
// each value once, where it is shown.
func Clip(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	n := MaxShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// Show is s as a report shows a value: [Clip] then [Printable].
func Show(s string) string { return Printable(Clip(s)) }

// Printable returns s as it is when every rune of it is printable, and
// otherwise Go-quoted ("a\r\nb", "\x1b[31m"), so that a value taken from
// the environment cannot start a new line or steer a terminal. Invalid
// UTF-8 counts as not printable.
func Printable(s string) string {
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Request renders req's URL with [URL]: no userinfo, no token-like query
// value; "" without a URL.
func Request(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	return URL(req.URL.String())
}
