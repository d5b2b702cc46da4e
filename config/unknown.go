package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// unknownVars sorts the variables that carry a declared system's prefix
// but match none of its settings. A near miss of a setting's name
// (PAYMENTS_CONECT_TIMEOUT, PAYMENTS_RETRYS, PAYMENTS_TIMEOUT_READ) is a
// typo that would otherwise be silently ignored: it is a problem, with
// its "did you mean". Anything else is not outbound's: an SDK's own
// variables share the prefix (STRIPE_SECRET_KEY, OPENAI_API_KEY), and so
// do the ones Kubernetes injects for Services (PAYMENTS_SERVICE_HOST).
// Those are returned in ignored, by system name, sorted; their values are
// never looked at.
//
// A variable whose suffix starts with ROUTE_ is always outbound's: a
// setting of a declared route, or a problem (see routeVarProblem).
func unknownVars(env map[string]string, byPrefix map[string]string, routes map[string][]LoadedRoute) (probs []Problem, ignored map[string][]string) {
next:
	for k := range env {
		// A setting of any declared system is known. Otherwise the
		// longest declared prefix wins: with systems "payments" and
		// "payments-eu", PAYMENTS_EU_X belongs to payments-eu.
		name, prefix := "", ""
		for i := strings.IndexByte(k, '_'); i >= 0; {
			if n, ok := byPrefix[k[:i]]; ok {
				if _, known := fields().bySuffix[k[i+1:]]; known || k[i+1:] == RoutesSuffix {
					continue next
				}
				if suffix := k[i+1:]; strings.HasPrefix(suffix, routeInfix) {
					if rule := routeVarProblem(k[:i], suffix, routes[k[:i]]); rule != "" {
						probs = append(probs, Problem{System: n, Var: k, Value: redacted, Source: FromEnv, Rule: rule})
					}
					continue next
				}
				name, prefix = n, k[:i]
			}
			j := strings.IndexByte(k[i+1:], '_')
			if j < 0 {
				break
			}
			i += 1 + j
		}
		if name == "" {
			continue
		}
		s := ""
		if !serviceLinkRE.MatchString(k[len(prefix)+1:]) {
			s = suggest(k[len(prefix)+1:])
		}
		if s == "" {
			if ignored == nil {
				ignored = make(map[string][]string)
			}
			ignored[name] = append(ignored[name], k)
			continue
		}
		// The value of the variable may be anything, a secret included:
		// never print it.
		probs = append(probs, Problem{System: name, Var: k, Value: redacted, Source: FromEnv,
			Rule: fmt.Sprintf("matches no setting of system %q; did you mean %s_%s?", name, prefix, s)})
	}
	sort.Slice(probs, func(i, j int) bool { return probs[i].Var < probs[j].Var })
	for _, ks := range ignored {
		sort.Strings(ks)
	}
	return probs, ignored
}

// serviceLinkRE matches the suffixes of the variables Kubernetes sets for
// a Service named like the system ("payments": PAYMENTS_SERVICE_HOST) or
// starting like it ("payments-db": PAYMENTS_DB_PORT_5432_TCP_ADDR), so
// that another team creating a Service cannot stop this pod from starting.
var serviceLinkRE = regexp.MustCompile(`^([A-Z0-9_]+_)?(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)$`)

// suggest returns the setting suffix s is a likely typo of, or "": the
// same words in another order (TIMEOUT_READ), or a name at most two
// edits away (one for names shorter than six bytes), case aside. Further
// than that, the variable is taken to be someone else's: STRIPE_SECRET_KEY
// is six edits from RETRIES, OPENAI_API_KEY six from BASE_URL.
func suggest(s string) string {
	s = strings.ToUpper(s)
	words := sortedWords(s)
	best, bestD := "", 3
	for i := range fields().all {
		f := &fields().all[i]
		if words == sortedWords(f.suffix) {
			return f.suffix
		}
		limit := 2
		if len(f.suffix) < 6 {
			limit = 1
		}
		if d := distance(s, f.suffix); d <= limit && d < bestD {
			best, bestD = f.suffix, d
		}
	}
	return best
}

// sortedWords returns the '_'-separated words of s, sorted and joined.
func sortedWords(s string) string {
	w := strings.Split(s, "_")
	sort.Strings(w)
	return strings.Join(w, "_")
}

// distance is the Levenshtein distance of a and b, capped for long input.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
