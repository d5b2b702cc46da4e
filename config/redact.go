package config

import (
	"net/url"
	"regexp"
	"strings"
)

const redacted = "REDACTED"

// sensitiveParam matches query parameter names whose values are secrets.
var sensitiveParam = regexp.MustCompile(`(?i)(token|key|secret|pass|pwd|sig|auth|cred|session|code)`)

// schemeRE matches a leading scheme and its "//": "https://".
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// RedactURL returns s with its userinfo and the values of token-like
// query parameters replaced by REDACTED. Text that does not parse as a URL
// has anything that looks like userinfo replaced, and its query dropped.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// In text that does not parse, userinfo may hold any byte ('/',
		// '?' and '#' included): redact everything between the scheme and
		// the last '@'.
		if at := strings.LastIndexByte(s, '@'); at >= 0 {
			start := len(schemeRE.FindString(s[:at]))
			s = s[:start] + redacted + s[at:]
		}
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i] + "?" + redacted
		}
		return s
	}
	if u.Opaque != "" {
		// "user:pass@host" parses as scheme "user" with opaque "pass@host":
		// the scheme is then the user name, so it goes too.
		if at := strings.LastIndexByte(u.Opaque, '@'); at >= 0 {
			u.Scheme, u.Opaque = "", redacted+u.Opaque[at:]
		} else {
			u.Opaque = redacted
		}
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = redacted
		} else {
			for k := range q {
				if sensitiveParam.MatchString(k) {
					q[k] = []string{redacted}
				}
			}
			u.RawQuery = q.Encode()
		}
	}
	if u.Fragment != "" {
		u.Fragment = redacted
	}
	return u.String()
}
