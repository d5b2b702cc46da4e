package config

import (
	"net/url"
	"regexp"
	"strings"
)

const redacted = "REDACTED"

// sensitiveParam matches query parameter names whose values are secrets.
var sensitiveParam = regexp.MustCompile(`(?i)(token|key|secret|pass|pwd|sig|auth|cred|session|code)`)

// userinfoRE finds userinfo in text that does not parse as a URL.
var userinfoRE = regexp.MustCompile(`//[^/?#]*@`)

// RedactURL returns s with its userinfo and the values of token-like
// query parameters replaced by REDACTED. Text that does not parse as a URL
// has anything that looks like userinfo replaced, and its query dropped.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		s = userinfoRE.ReplaceAllString(s, "//"+redacted+"@")
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i] + "?" + redacted
		}
		return s
	}
	if u.Opaque != "" {
		// "user:pass@host" parses as scheme "user" with opaque "pass@host".
		u.Opaque = redacted
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
