package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// unknownVars reports every variable that carries a declared system's
// prefix but matches none of its settings: almost always a typo
// (PAYMENTS_CONECT_TIMEOUT) that would otherwise be silently ignored.
//
// Variables that Kubernetes injects for Services (enableServiceLinks:
// PAYMENTS_SERVICE_HOST, PAYMENTS_PORT_443_TCP_ADDR, ...) are not reported.
func unknownVars(env map[string]string, known map[string]bool, byPrefix map[string]string) []Problem {
	var probs []Problem
	for k, v := range env {
		if known[k] {
			continue
		}
		// The longest declared prefix wins: with systems "payments" and
		// "payments-eu", PAYMENTS_EU_X belongs to payments-eu.
		name, prefix := "", ""
		for i := strings.IndexByte(k, '_'); i >= 0; {
			if n, ok := byPrefix[k[:i]]; ok {
				name, prefix = n, k[:i]
			}
			j := strings.IndexByte(k[i+1:], '_')
			if j < 0 {
				break
			}
			i += 1 + j
		}
		if name == "" || serviceLinkRE.MatchString(k[len(prefix)+1:]) {
			continue
		}
		rule := fmt.Sprintf("matches no setting of system %q", name)
		if s := suggest(k[len(prefix)+1:]); s != "" {
			rule += fmt.Sprintf("; did you mean %s_%s?", prefix, s)
		}
		// The value of an unknown variable may be anything, a secret
		// included: never print it.
		_ = v
		probs = append(probs, Problem{System: name, Var: k, Value: redacted, Source: FromEnv, Rule: rule})
	}
	sort.Slice(probs, func(i, j int) bool { return probs[i].Var < probs[j].Var })
	return probs
}

// serviceLinkRE matches the suffixes of the variables Kubernetes sets for
// a Service named like the system ("payments": PAYMENTS_SERVICE_HOST) or
// starting like it ("payments-db": PAYMENTS_DB_PORT_5432_TCP_ADDR), so
// that another team creating a Service cannot stop this pod from starting.
var serviceLinkRE = regexp.MustCompile(`^([A-Z0-9_]+_)?(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)$`)

// suggest returns the setting suffix closest to s, if it is close enough
// to be the intended one.
func suggest(s string) string {
	best, bestD := "", 4
	for i := range fieldTable {
		if d := distance(s, fieldTable[i].suffix); d < bestD {
			best, bestD = fieldTable[i].suffix, d
		}
	}
	return best
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
