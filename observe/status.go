package observe

import (
	"time"

	"github.com/outbound-go/outbound/config"
)

// BreakerCounts are the breaker's counts in its current window (closed)
// or state (half-open).
type BreakerCounts struct {
	Requests             uint32 `json:"requests"`
	Successes            uint32 `json:"successes"`
	Failures             uint32 `json:"failures"`
	Exclusions           uint32 `json:"exclusions"`
	ConsecutiveSuccesses uint32 `json:"consecutive_successes"`
	ConsecutiveFailures  uint32 `json:"consecutive_failures"`
}

// Status is a snapshot of one client, for health checks, metrics and the
// status page. Counters are totals since the registry was built.
type Status struct {
	System        string        `json:"system"`
	Breaker       BreakerState  `json:"breaker"`
	BreakerCounts BreakerCounts `json:"breaker_counts"`
	InFlight      int64         `json:"in_flight"`
	Capacity      int64         `json:"capacity"` // MAX_CONCURRENT: the ceiling of an adaptive limit
	Limit         int64         `json:"limit"`    // the bulkhead's current limit: Capacity unless ADAPTIVE_CONCURRENCY

	Calls            uint64 `json:"calls"`             // calls admitted by the bulkhead
	Sent             uint64 `json:"sent"`              // calls that sent requests and ended (every outcome but the refusals)
	OK               uint64 `json:"ok"`                // calls answered with a response the breaker counts a success (outcome ok)
	Retries          uint64 `json:"retries"`           // retries sent
	GaveUp           uint64 `json:"gave_up"`           // calls that sent requests and ended on a failure: gave_up, failed (a 501), retry_throttled, canceled
	BulkheadRefused  uint64 `json:"bulkhead_refused"`  // calls refused by the bulkhead
	BreakerRefused   uint64 `json:"breaker_refused"`   // calls refused by the breaker
	BudgetRefused    uint64 `json:"budget_refused"`    // calls refused because the caller's budget was spent
	BudgetCapped     uint64 `json:"budget_capped"`     // calls whose deadline came from the caller's budget
	RetriesThrottled uint64 `json:"retries_throttled"` // retries refused by the retry throttle (RETRY_BUDGET_*)
	HedgesSent       uint64 `json:"hedges_sent"`       // extra copies sent by hedging (HEDGE_DELAY)
	HedgesWon        uint64 `json:"hedges_won"`        // hedges whose answer the caller got

	// Outcomes counts every call by how it ended (observe.CallOutcomes),
	// refusals included: the labels of the metrics and the logs.
	// Success is OK / Sent, refusals apart.
	Outcomes map[string]uint64 `json:"outcomes"`

	// Forced is an operator's override of the breaker (Client.Force); nil
	// when none. Breaker then shows the forced state.
	Forced *Forced `json:"forced,omitempty"`

	// Rate is the system's quota (RATE_LIMIT); nil without one.
	Rate *RateStatus `json:"rate,omitempty"`

	// Routes are the system's routes (<P>_ROUTES), in declaration order;
	// nil without any. The counters above count their calls too.
	Routes []RouteStatus `json:"routes,omitempty"`

	// Fleet is the sync state of a breaker shared by a fleet
	// (BREAKER_SCOPE=fleet); nil at scope local.
	Fleet *FleetSync `json:"fleet,omitempty"`

	// Config is the effective settings, redacted. It is computed once and
	// shared by every snapshot: do not modify it.
	Config []config.Var `json:"config"`

	// Faults says what fault injection does to this system's attempts
	// (a drill, OUTBOUND_FAULTS=on): "aborts 10% of attempts with 503".
	// Empty when none; then the counts below stay 0.
	Faults         string `json:"faults,omitempty"`
	InjectedAborts uint64 `json:"injected_aborts,omitempty"` // attempts answered by an injected abort
	InjectedDelays uint64 `json:"injected_delays,omitempty"` // attempts held by an injected delay
}

// FleetSync is the sync state of a breaker shared by a fleet: whether the
// pods share its evidence and state now, or each decides alone (Redis
// failing, slow or emptied), since when, and the last error.
type FleetSync struct {
	Synced    bool      `json:"synced"`
	Since     time.Time `json:"since"`
	LastError string    `json:"last_error,omitempty"`
	// Malformed counts the values read from Redis or the fleet's channel
	// that were malformed or out of range, and ignored; Capped those cut
	// to the pod's own bounds (an open time past BREAKER_OPEN_TIMEOUT, a
	// lease past its life). Both are for the whole fleet of this pod.
	Malformed uint64 `json:"malformed,omitempty"`
	Capped    uint64 `json:"capped,omitempty"`
}

// RateStatus is the state of a system's quota of requests (RATE_LIMIT).
type RateStatus struct {
	Limit string `json:"limit"` // as RATE_LIMIT spells it: "200/s"
	Scope string `json:"scope"` // local or fleet
	Burst int    `json:"burst"`
	// Share is the rate this pod may spend now, in requests per second:
	// the whole limit at scope local, its share of the fleet's at scope
	// fleet.
	Share float64 `json:"share"`
	// Tokens is what this pod may send at once now.
	Tokens float64 `json:"tokens"`
	// PausedUntil is when the pause the upstream asked for ends; zero
	// when the system is not paused.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Refused counts the requests the quota refused (ErrRateLimited).
	Refused uint64 `json:"refused"`
	// Synced is true at scope fleet while the pod's share comes from the
	// fleet's Redis and the fleet is in sync (it shares pauses and
	// shares through Redis); false when either is not, as the fleet's own
	// sync state says.
	Synced bool `json:"synced,omitempty"`
	// LastError is, at scope fleet while not synced, the fleet's last
	// Redis error (password redacted), as its sync state shows it.
	LastError string `json:"last_error,omitempty"`
}

// MaxForce is the longest an operator's override of a breaker lasts
// unless renewed, on one pod or on the fleet: an override read from
// elsewhere (Redis, a message) that lasts longer is cut to it.
const MaxForce = 24 * time.Hour

// Forced is an operator's override of a system's breaker: its state
// (open or closed) and when it ends unless renewed (at most [MaxForce]).
type Forced struct {
	State BreakerState `json:"state"`
	Until time.Time    `json:"until"`
}

// RouteStatus is a snapshot of one of a system's routes: its settings
// and what only it has (its own breaker, its own rate limit).
type RouteStatus struct {
	Name        string        `json:"name"`
	Match       string        `json:"match"`
	Calls       uint64        `json:"calls"` // calls admitted on the route
	ReadTimeout time.Duration `json:"read_timeout"`
	CallTimeout time.Duration `json:"call_timeout"`
	Retries     int           `json:"retries"`
	Idempotent  bool          `json:"idempotent,omitempty"`
	// OwnBreaker: the route has a breaker of its own (BREAKER=own);
	// Breaker and BreakerCounts are its. Otherwise the route shares the
	// system's and they are empty.
	OwnBreaker    bool          `json:"own_breaker,omitempty"`
	Breaker       BreakerState  `json:"breaker,omitempty"`
	BreakerCounts BreakerCounts `json:"breaker_counts,omitzero"`
	// Rate is the route's own limit; nil without one.
	Rate *RateStatus `json:"rate,omitempty"`
}

// SettingsStatus is the state of a registry's settings file
// (OUTBOUND_CONFIG_FILE): which version of it the pod runs, since when,
// and the last change it refused. The zero value: no settings file.
type SettingsStatus struct {
	File string `json:"file,omitempty"`
	// Version is the applied content's version: the first 12 hex digits
	// of its SHA-256, the same on every pod that runs the same file.
	Version   string    `json:"version,omitempty"`
	AppliedAt time.Time `json:"applied_at,omitzero"`
	// Applied counts the changes applied since start; Refusals those
	// refused.
	Applied  uint64 `json:"applied"`
	Refusals uint64 `json:"refusals"`
	// Refused is the last change refused, when no valid one came after
	// it; nil otherwise.
	Refused *SettingsRefusal `json:"refused,omitempty"`
}

// SettingsRefusal is a change of the settings file that was refused
// whole: nothing of it applies.
type SettingsRefusal struct {
	Version string    `json:"version,omitempty"` // the refused content's
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"` // the report: every problem, redacted
}
