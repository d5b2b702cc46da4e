package health

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// Policy decides readiness from a snapshot of every system, in the
// registry's declaration order. It returns why the service is not ready,
// one reason per line of the report; none means ready.
type Policy func(systems []observe.Status) (notReady []string)

// AlwaysReady is the [Policy] of a service that degrades rather than
// stops when any dependency fails: it is always ready, and the report
// still shows every system.
func AlwaysReady([]observe.Status) []string { return nil }

// CriticalSystems is the [Policy] of a service that cannot do its job
// without the named systems: it is not ready while the breaker of any of
// them is open. Half-open is ready, so that the probes the breaker lets
// through can close it. A name the registry does not declare is a
// reason too, so that a typo keeps the new pods out of service instead
// of silently guarding nothing.
func CriticalSystems(names ...string) Policy {
	names = slices.Clone(names)
	return func(systems []observe.Status) []string {
		var reasons []string
		for _, n := range names {
			i := slices.IndexFunc(systems, func(s observe.Status) bool { return s.System == n })
			switch {
			case i < 0:
				reasons = append(reasons, fmt.Sprintf("%s: critical system not declared in the registry", n))
			case systems[i].Breaker == observe.BreakerOpen:
				reasons = append(reasons, fmt.Sprintf("%s: circuit breaker open", n))
			}
		}
		return reasons
	}
}

// Report is the body of a readiness response.
type Report struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"` // why not ready; empty when ready
	Systems []System `json:"systems"`
	// FaultInjection names, loudly, every system that injects faults
	// (drills, OUTBOUND_FAULTS=on) and what: "payments: aborts 10% of
	// attempts with 503". Absent when none does; it never makes a
	// service unready by itself.
	FaultInjection []string `json:"fault_injection,omitempty"`
}

// System is one system in a [Report].
type System struct {
	Name     string               `json:"name"`
	Breaker  observe.BreakerState `json:"breaker"`
	InFlight int64                `json:"in_flight"`
	Capacity int64                `json:"capacity"`
	Faults   string               `json:"faults,omitempty"` // what fault injection does (drills); absent when none
}

// Readiness returns the readiness probe handler: a JSON [Report] of
// every system of r, with 200 when policy finds no reason not to be
// ready and 503 otherwise. A nil policy is [AlwaysReady]. It answers GET
// and HEAD; the report is never cached.
func Readiness(r *registry.Registry, policy Policy) http.Handler {
	if policy == nil {
		policy = AlwaysReady
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !allowed(w, req) {
			return
		}
		st := r.Status()
		rep := Report{Reasons: policy(st), Systems: make([]System, 0, len(st))}
		if rep.Reasons == nil {
			rep.Reasons = []string{}
		}
		rep.Ready = len(rep.Reasons) == 0
		for _, s := range st {
			rep.Systems = append(rep.Systems, System{Name: s.System, Breaker: s.Breaker, InFlight: s.InFlight, Capacity: s.Capacity, Faults: s.Faults})
			if s.Faults != "" {
				rep.FaultInjection = append(rep.FaultInjection, s.System+": "+s.Faults)
			}
		}
		code := http.StatusOK
		if !rep.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, req, code, rep)
	})
}

// Liveness returns the liveness probe handler: it always answers 200
// {"status":"ok"} and touches nothing, upstreams least of all.
func Liveness() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !allowed(w, req) {
			return
		}
		writeJSON(w, req, http.StatusOK, struct {
			Status string `json:"status"`
		}{"ok"})
	})
}

// allowed answers 405 to methods other than GET and HEAD.
func allowed(w http.ResponseWriter, req *http.Request) bool {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

func writeJSON(w http.ResponseWriter, req *http.Request, code int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if req.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
