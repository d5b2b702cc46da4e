package statuspage

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// ControlHeader is the header every request to [Controls] carries, with
// the value "1". A browser sends a custom header to another origin only
// after a CORS preflight, which the controls never grant: a web page
// that an operator has open cannot send a request that changes a
// breaker.
const ControlHeader = "X-Outbound-Control"

// TokenVar is the variable that holds the bearer token of the controls
// when a deployment wants one ([WithToken]): `outbound breaker --pod`
// reads it, and a service may wire it:
//
//	statuspage.Controls(reg, statuspage.WithToken(os.Getenv(statuspage.TokenVar)))
const TokenVar = "OUTBOUND_CONTROL_TOKEN"

// A ControlOption configures [Controls].
type ControlOption interface{ apply(*controls) }

type controlOption func(*controls)

func (f controlOption) apply(c *controls) { f(c) }

// WithToken makes the controls require "Authorization: Bearer token" on
// every request, compared in constant time, for a deployment whose admin
// port is reachable by more than its operators. An empty token requires
// none (the default).
func WithToken(token string) ControlOption {
	return controlOption(func(c *controls) {
		if token == "" {
			c.token = nil
			return
		}
		sum := sha256.Sum256([]byte(token))
		c.token = sum[:]
	})
}

// WithHosts adds names (without a port, "admin.shop.internal") under
// which the controls may be reached, besides an IP address and
// localhost: the names of a proxy or a Service in front of the admin
// port.
func WithHosts(names ...string) ControlOption {
	return controlOption(func(c *controls) {
		for _, n := range names {
			c.hosts = append(c.hosts, strings.ToLower(strings.TrimSuffix(n, ".")))
		}
	})
}

// Controls serves an operator's controls of reg's breakers, for an
// incident:
//
//	POST <prefix>/breaker/{system}?state=open&for=15m   force open (every call refused, no I/O)
//	POST <prefix>/breaker/{system}?state=closed&for=15m force closed (every call let through)
//	POST <prefix>/breaker/{system}?state=auto          release: back to the breaker's judgement
//
// Every request must carry [ControlHeader]: 1. It answers 200 with the
// system's status (JSON), 400 for a bad state or duration, 404 for an
// unknown system, 405 for any method but POST, and 502 when the fleet's
// Redis did not take an override at BREAKER_SCOPE=fleet
// (registry.Client.Force). "for" is a duration of at most 24h (default
// 15m) after which the override ends unless renewed. `outbound breaker
// --pod URL` speaks to it.
//
// It refuses with 403, before it looks at the system, a request that a
// web page could have sent: one without [ControlHeader]; one whose
// Origin is neither the Host it was sent to nor a name given with
// [WithHosts]; one marked Sec-Fetch-Site cross-site or same-site
// (another site, or another subdomain of the same site); one whose Host
// is not the listener's. The Host must be an IP address (a request
// reaches the listener under an IP only if it is one of the listener's:
// the pod's, a Service's, a port-forward's 127.0.0.1), localhost, or a
// name given with [WithHosts]; a name that is not listed is what DNS
// rebinding sends. With [WithToken], a request without the token is
// refused with 401.
//
// It changes how the service behaves: mount it on an admin listener that
// only operators reach, never on the service's public port. It is safe
// for concurrent use.
func Controls(reg *registry.Registry, opts ...ControlOption) http.Handler {
	c := &controls{reg: reg}
	for _, o := range opts {
		o.apply(c)
	}
	return c
}

type controls struct {
	reg   *registry.Registry
	token []byte   // sha256 of the bearer token; nil: none needed
	hosts []string // names the listener may be reached at, lower case
}

func (c *controls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	if why := c.foreign(r); why != "" {
		http.Error(w, "refused: "+why, http.StatusForbidden)
		return
	}
	if !c.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="outbound controls"`)
		http.Error(w, "refused: the controls need Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/breaker/")
	if !ok || name == "" || strings.Contains(name, "/") {
		http.Error(w, "POST /breaker/{system}?state=open|closed|auto&for=15m", http.StatusNotFound)
		return
	}
	cl, err := c.reg.Client(name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	state, d, err := parseForce(r.URL.Query().Get("state"), r.URL.Query().Get("for"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := cl.Force(state, d); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(cl.Status())
}

// foreign says why r may come from a web page rather than an operator;
// empty when it does not.
func (c *controls) foreign(r *http.Request) string {
	if r.Header.Get(ControlHeader) != "1" {
		return "the controls need the header " + ControlHeader + ": 1"
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return "Sec-Fetch-Site " + site
	}
	if !c.listener(r.Host) {
		return "Host " + r.Host + " is not this listener's (an IP address, localhost, or a name given to the controls)"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || (!strings.EqualFold(u.Host, r.Host) && !c.listed(u.Hostname())) {
			return "Origin " + o + " is not this listener's"
		}
	}
	return ""
}

// listener reports whether host (host[:port] of a request) names this
// listener: an IP address, localhost, or a listed name.
func (c *controls) listener(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "" {
		return false
	}
	if a, err := netip.ParseAddr(name); err == nil && a.Zone() == "" {
		return true
	}
	return name == "localhost" || c.listed(name)
}

// listed reports whether name was given to [WithHosts].
func (c *controls) listed(name string) bool {
	return slices.Contains(c.hosts, strings.ToLower(strings.TrimSuffix(name, ".")))
}

// authorized reports whether r carries the token, when one is needed.
func (c *controls) authorized(r *http.Request) bool {
	if c.token == nil {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], c.token) == 1 && ok
}

// parseForce reads the state (open, closed, auto) and the duration of an
// override (default 15m).
func parseForce(state, dur string) (observe.BreakerState, time.Duration, error) {
	var s observe.BreakerState
	switch state {
	case "open":
		s = observe.BreakerOpen
	case "closed":
		s = observe.BreakerClosed
	case "auto", "release":
		return "", 0, nil
	default:
		return "", 0, errBadState
	}
	if dur == "" {
		return s, 15 * time.Minute, nil
	}
	d, err := time.ParseDuration(dur)
	if err != nil || d <= 0 || d > 24*time.Hour {
		return "", 0, errBadFor
	}
	return s, d, nil
}

type controlError string

func (e controlError) Error() string { return string(e) }

const (
	errBadState = controlError("state must be open, closed or auto")
	errBadFor   = controlError("for must be a positive duration (15m, 1h), at most 24h")
)
