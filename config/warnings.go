package config

import (
	"slices"

	"github.com/outbound-go/outbound/internal/redact"
)

// strayScopes are the scope settings that, set without a system's prefix,
// would leave a fleet unused without a word: an operator who writes
// BREAKER_SCOPE=fleet means some system's.
var strayScopes = []string{"BREAKER_SCOPE", "RATE_SCOPE"}

// Warnings returns what a load found that is not wrong but does not do
// what it seems to: each system's [Loaded.Warnings] (a client certificate
// about to expire), then, once for the load, a fleet Redis
// (OUTBOUND_FLEET_REDIS_URL) that no system at BREAKER_SCOPE=fleet or
// RATE_SCOPE=fleet uses, and a BREAKER_SCOPE or RATE_SCOPE set without a
// system's prefix, which no system reads. `outbound check` prints them;
// registry.New logs them at Warn. They never make [Load] fail.
func Warnings(loaded []Loaded) []Problem {
	var out []Problem
	for _, l := range loaded {
		out = append(out, l.Warnings()...)
	}
	if len(loaded) > 0 {
		out = append(out, loaded[0].loadWarns...)
	}
	return out
}

// loadWarnings are the warnings of the load as a whole (see [Warnings]).
func loadWarnings(env map[string]string, fleet Fleet, loaded []Loaded) []Problem {
	var out []Problem
	example := "PAYMENTS"
	if len(loaded) > 0 {
		example = loaded[0].Prefix
	}
	used := slices.ContainsFunc(loaded, func(l Loaded) bool {
		return l.Client.BreakerScope == "fleet" || l.Client.RateScope == "fleet"
	})
	if fleet.RedisURL != "" && !used && len(loaded) > 0 {
		out = append(out, Problem{Var: FleetRedisURLVar, Value: redact.RedisURL(fleet.RedisURL), Source: FromEnv,
			Rule: "no system is at BREAKER_SCOPE=fleet or RATE_SCOPE=fleet, so nothing uses this Redis: set " +
				example + "_BREAKER_SCOPE=fleet (or _RATE_SCOPE=fleet) for the systems to share, or unset it"})
	}
	for _, k := range strayScopes {
		if v, ok := env[k]; ok {
			out = append(out, Problem{Var: k, Value: v, Source: FromEnv,
				Rule: "no system reads it: a system's scope is set under its prefix (" + example + "_" + k + ")"})
		}
	}
	return out
}
