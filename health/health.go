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
// them is open on this pod's own evidence. Half-open is ready, so that
// the probes the breaker lets through can close it. A name the registry
// does not declare is a reason too, so that a typo keeps the new pods
// out of service instead of silently guarding nothing.
//
// Two open breakers are no reason, because every pod would share them
// and Kubernetes would take every endpoint of the Service away at once,
// turning the service's fast answers into its callers' connection
// errors without sending a single request to a pod that could do
// better:
//   - a breaker at BREAKER_SCOPE=fleet: its state is the fleet's (one
//     pod's trip opens it on every pod; a pod that runs alone while
//     Redis fails still decides as the others would), so it would make
//     every pod unready or none;
//   - an operator's override (Client.Force, outbound breaker): it asks
//     that the calls be refused, not that the pods leave the Service,
//     and at scope fleet it holds on every pod.
//
// The report shows both (breaker open, with its scope and forced).
func CriticalSystems(names ...string) Policy {
	names = slices.Clone(names)
	return func(systems []observe.Status) []string {
		var reasons []string
		for _, n := range names {
			i := slices.IndexFunc(systems, func(s observe.Status) bool { return s.System == n })
			switch {
			case i < 0:
				reasons = append(reasons, fmt.Sprintf("%s: critical system not declared in the registry", n))
			case systems[i].Breaker == observe.BreakerOpen && systems[i].Forced == nil && scope(systems[i]) == scopeLocal:
				reasons = append(reasons, fmt.Sprintf("%s: circuit breaker open", n))
			}
		}
		return reasons
	}
}

// The values of BREAKER_SCOPE.
const (
	scopeLocal = "local"
	scopeFleet = "fleet"
)

// scope is the system's BREAKER_SCOPE: fleet when its breaker is shared
// by the fleet (as its configuration or its fleet sync state says), else
// local.
func scope(s observe.Status) string {
	if s.Fleet != nil {
		return scopeFleet
	}
	for _, v := range s.Config {
		if v.Setting == "BreakerScope" && v.Value == scopeFleet {
			return scopeFleet
		}
	}
	return scopeLocal
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
	Name    string               `json:"name"`
	Breaker observe.BreakerState `json:"breaker"`
	// Scope is the breaker's BREAKER_SCOPE: local, or fleet (shared by
	// every pod; never a reason not to be ready).
	Scope string `json:"scope"`
	// Forced is true while an operator's override holds the breaker
	// (never a reason not to be ready).
	Forced   bool   `json:"forced,omitempty"`
	InFlight int64  `json:"in_flight"`
	Capacity int64  `json:"capacity"`
	Faults   string `json:"faults,omitempty"` // what fault injection does (drills); absent when none
	// Routes are the system's routes that have a breaker of their own
	// (<P>_ROUTE_<R>_BREAKER=own), with its state: shown, never a reason
	// not to be ready (one operation failing is no reason to take the
	// pod out of the Service).
	Routes []Route `json:"routes,omitempty"`
}

// Route is a route's own breaker in a [Report].
type Route struct {
	Name    string               `json:"name"`
	Breaker observe.BreakerState `json:"breaker"`
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
			sys := System{Name: s.System, Breaker: s.Breaker, Scope: scope(s), Forced: s.Forced != nil, InFlight: s.InFlight, Capacity: s.Capacity, Faults: s.Faults}
			for _, rt := range s.Routes {
				if rt.OwnBreaker {
					sys.Routes = append(sys.Routes, Route{Name: rt.Name, Breaker: rt.Breaker})
				}
			}
			rep.Systems = append(rep.Systems, sys)
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
