package config

import "github.com/outbound-go/outbound/internal/redact"

const redacted = redact.Mark

// RedactURL returns s, a request URL, with its userinfo, its fragment and
// the query values of every name not known to be safe (page, limit,
// sort, ...) replaced by REDACTED. Text that does not parse as a URL has
// anything that looks like userinfo replaced, and its query dropped.
//
// A system's BASE_URL is shown with every query value redacted, whatever
// its name.
func RedactURL(s string) string { return redact.URL(s) }
