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
// Loading uses github.com/kelseyhightower/envconfig to name and look up
// the variables and github.com/go-playground/validator/v10 to check them.
// Unlike envconfig.Process, [Load] does not stop at the first bad value: it
// collects every problem of every field of every system (values that do not
// parse, rules that are broken, variables that match no field) into one
// [*Error], so a pod with a bad environment stops at start with one report
// that names every bad variable. Secrets (URL userinfo, token-like query
// parameters) are redacted in every message.
//
// The timeout rules are strict: every timeout is > 0 (zero would mean
// "never time out"), connect < read < call, call >= connect + read + 1s,
// TLS handshake <= read, and read <= 60s, because a synchronous call that
// waits longer for its first byte should be made asynchronous (202 +
// polling) instead.
package config
