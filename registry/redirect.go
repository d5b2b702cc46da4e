package registry

import (
	"net/http"
	"net/url"

	"github.com/outbound-go/outbound/config"
)

// redirectPolicy returns the CheckRedirect of a system: "none" returns
// every 3xx to the caller, "same-host" follows only to the base URL's
// scheme and host, "any" follows anywhere; all stop after MaxRedirects.
// A redirect that is not followed comes back to the caller as the 3xx
// response, not as an error.
//
// net/http already drops Authorization, Cookie and WWW-Authenticate on a
// redirect to another domain; Idempotency-Key is dropped too, because a
// key minted for one system means nothing to another.
func redirectPolicy(c config.Client, base *url.URL) func(req *http.Request, via []*http.Request) error {
	mode, limit := c.FollowRedirects, c.MaxRedirects
	return func(req *http.Request, via []*http.Request) error {
		if mode == "none" {
			return http.ErrUseLastResponse
		}
		// via holds the requests sent so far; following this redirect
		// would be redirect number len(via).
		if len(via) > limit || (mode == "same-host" && !sameHost(req.URL, base)) {
			return http.ErrUseLastResponse
		}
		if !sameHost(req.URL, via[0].URL) {
			req.Header.Del("Idempotency-Key")
		}
		return nil
	}
}

func sameHost(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && a.Host == b.Host
}
