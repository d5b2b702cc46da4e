package statuspage

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// Controls serves an operator's controls of reg's breakers, for an
// incident:
//
//	POST <prefix>/breaker/{system}?state=open&for=15m   force open (every call refused, no I/O)
//	POST <prefix>/breaker/{system}?state=closed&for=15m force closed (every call let through)
//	POST <prefix>/breaker/{system}?state=auto          release: back to the breaker's judgement
//
// It answers 200 with the system's status (JSON), 400 for a bad state or
// duration, 404 for an unknown system, 405 for any method but POST, and
// 502 when the fleet's Redis did not take an override at
// BREAKER_SCOPE=fleet (registry.Client.Force). "for" is a duration of at
// most 24h (default 15m) after which the override ends unless renewed.
// `outbound breaker --pod URL` speaks to it.
//
// It changes how the service behaves: mount it on an admin listener that
// only operators reach, never on the service's public port. It is safe
// for concurrent use.
func Controls(reg *registry.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, "/breaker/")
		if !ok || name == "" || strings.Contains(name, "/") {
			http.Error(w, "POST /breaker/{system}?state=open|closed|auto&for=15m", http.StatusNotFound)
			return
		}
		c, err := reg.Client(name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		state, d, err := parseForce(r.URL.Query().Get("state"), r.URL.Query().Get("for"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.Force(state, d); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(c.Status())
	})
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
