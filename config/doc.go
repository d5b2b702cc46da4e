// Package config loads, validates and documents the settings of every
// external system an outbound registry talks to.
//
// Each system has a name ("payments", "order-history") and reads its
// settings from environment variables under its own prefix: the name in
// upper snake case ("PAYMENTS_CONNECT_TIMEOUT", "ORDER_HISTORY_BASE_URL").
// Values come, from weakest to strongest, from the baseline ([Baseline]),
// the per-system defaults declared in code ([System].Defaults) and the
// environment. Systems are declared in code, in OUTBOUND_SYSTEMS
// ("payments,inventory"), or both.
//
// Each setting's variable name comes from github.com/kelseyhightower/envconfig:
// the fields of [Client] carry its split_words tag (ConnectTimeout reads
// PAYMENTS_CONNECT_TIMEOUT) or, where its convention would split an
// acronym wrongly, its envconfig tag (TLS_CA_FILE), and this package asks
// envconfig.Usagef for every name once. That is the part of envconfig that
// fits here. Its Process does not read the values, for three reasons: it
// stops at the first value that does not parse (and its ParseError has no
// Unwrap), where [Load] must name every bad variable of every system in
// one report; it reads only the process environment, through its own
// lookup, so a load could not be given an environment ([LoadEnv]) and
// tests would have to serialise on t.Setenv; and it fills typed fields
// without saying which came from the environment, which every report shows
// ("(baseline default)"). So one loop (loadSystem) reads each name from
// the given environment, parses it with the standard library
// (time.ParseDuration, strconv.ParseInt, ...) and records its source;
// github.com/go-playground/validator/v10 then checks the struct. [Load]
// collects every problem of every field of every system (values that do
// not parse, rules that are broken, likely typos of a setting's name) into
// one [*Error], so a pod with a bad environment stops at start with one
// report that names every bad variable. Secrets (URL userinfo, every query
// value of BASE_URL) are redacted in every message, and a value holding a
// control character is shown quoted.
//
// Each rule of a setting is written once, in the validate tag of its
// [Client] field (validator/v10's tags, cross-field ones included, and the
// custom tags baseurl, callbudget, fleetredis, hedgedelay, httpsbase,
// needsrate and ratelimit); the message a problem
// shows, the reference of [Reference] (`outbound env`, its ConfigMap and
// the README's table) are derived from it. A rule between two settings is
// reported on the one the operator set (env over code over baseline),
// with the other side's value and source.
//
// Variables under a system's prefix that are no setting are either a
// near miss of one (PAYMENTS_CONECT_TIMEOUT: a problem, with "did you
// mean") or not outbound's (an SDK's STRIPE_SECRET_KEY: left alone, listed
// by [Loaded.Ignored]).
//
// The registry-wide variables of a fleet-shared breaker and quota,
// OUTBOUND_FLEET_REDIS_URL and OUTBOUND_FLEET_NAMESPACE, are checked in
// the same report ([Fleet.Validate]); a system with BREAKER_SCOPE=fleet or
// RATE_SCOPE=fleet needs the first.
//
// A system's rate limit (RATE_LIMIT, RATE_BURST, RATE_SCOPE,
// RATE_MAX_WAIT) is read like any setting; [Client.Rate] gives it parsed,
// as a [Rate] with its effective burst. This package never dials Redis: an unreachable Redis
// is no configuration problem (the fleet module starts degraded).
//
// Load reads the TLS files once, checks them and keeps what it read
// ([Loaded.TLSFiles]) for the registry.
//
// The same report, without starting the service: `outbound check`
// (cmd/outbound) prints it for systems declared by name, at the baseline;
// a service prints it for the systems it declares in code, code defaults
// included, from its own binary with package
// github.com/outbound-go/outbound/config/configcheck (`myservice
// check-config`). A load that declares no system at all is a problem.
//
// The timeout rules are strict: every timeout is > 0 (zero would mean
// "never time out"), connect < read < call, call >= connect + read + 1s,
// TLS handshake <= read, and read <= 60s, because a synchronous call that
// waits longer for its first byte should be made asynchronous (202 +
// polling) instead.
package config
