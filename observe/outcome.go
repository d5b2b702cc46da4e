package observe

// Outcome labels how an attempt or a call ended. Its names are the
// values of the outcome label of every metric and log record.
type Outcome uint8

// The outcomes.
const (
	// OutcomeOK is a response the caller gets, which the breaker counts
	// as a success.
	OutcomeOK Outcome = iota
	// OutcomeFailed is a response the caller gets that the breaker
	// counts as a failure: a 5xx no retry can cure (501, 505, ...), or a
	// temporary status the server said not to retry.
	OutcomeFailed
	// OutcomeRetry is an attempt that failed and will be retried.
	OutcomeRetry
	// OutcomeGaveUp is a failure no attempt follows: retries ran out,
	// were not allowed, or would pass the deadline.
	OutcomeGaveUp
	OutcomeBreakerOpen    // refused by the breaker, no I/O
	OutcomeForcedOpen     // refused by a breaker an operator forced open, no I/O
	OutcomeBulkheadFull   // refused by the bulkhead, no I/O
	OutcomeBudgetSpent    // the caller's budget was spent before any I/O
	OutcomeRateLimited    // refused by the rate limit, no I/O
	OutcomeRetryThrottled // a retry was denied by the retry throttle (RETRY_BUDGET_*)
	OutcomeCanceled       // the caller cancelled
	OutcomeHedgeLost      // an attempt cancelled because another copy of it answered first
	numOutcomes
)

// outcomeRow is one row of the table of outcomes.
type outcomeRow struct {
	name          string
	call, attempt bool // it can end a call, an attempt
	refusal       bool // nothing was sent
}

var outcomes = [numOutcomes]outcomeRow{
	OutcomeOK:             {"ok", true, true, false},
	OutcomeFailed:         {"failed", true, true, false},
	OutcomeRetry:          {"retry", false, true, false},
	OutcomeGaveUp:         {"gave_up", true, true, false},
	OutcomeBreakerOpen:    {"breaker_open", true, true, true},
	OutcomeForcedOpen:     {"forced_open", true, true, true},
	OutcomeBulkheadFull:   {"bulkhead_full", true, false, true},
	OutcomeBudgetSpent:    {"budget_spent", true, false, true},
	OutcomeRateLimited:    {"rate_limited", true, true, true},
	OutcomeRetryThrottled: {"retry_throttled", true, false, false},
	OutcomeCanceled:       {"canceled", true, true, false},
	OutcomeHedgeLost:      {"hedge_lost", false, true, false},
}

// String is the outcome's label ("breaker_open").
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomes[o].name
	}
	return "unknown"
}

// Refused reports whether o is a refusal: nothing was sent.
func (o Outcome) Refused() bool { return o < numOutcomes && outcomes[o].refusal }

// CallOutcomes returns the outcomes a call can end with, in order.
func CallOutcomes() []Outcome { return outcomesWhere(func(r outcomeRow) bool { return r.call }) }

// AttemptOutcomes returns the outcomes an attempt can end with, in order.
func AttemptOutcomes() []Outcome { return outcomesWhere(func(r outcomeRow) bool { return r.attempt }) }

func outcomesWhere(keep func(outcomeRow) bool) []Outcome {
	var out []Outcome
	for o := range numOutcomes {
		if keep(outcomes[o]) {
			out = append(out, o)
		}
	}
	return out
}

// NumOutcomes is the number of outcomes: an array indexed by Outcome
// holds one slot for each.
const NumOutcomes = int(numOutcomes)

// StatusClass returns the bounded label of an HTTP status: "1xx" to
// "5xx", or "" for no status (0) or one outside 100..599.
func StatusClass(code int) string {
	if code < 100 || code > 599 {
		return ""
	}
	return statusClasses[code/100-1]
}

var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}
