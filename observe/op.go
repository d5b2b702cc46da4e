package observe

// Op names what ended an attempt, or a call, without a response: a phase
// of the attempt that failed (connect, TLS, the wait for headers, ...), a
// deadline, or the stage of the pipeline that refused the call before
// anything was sent. The zero Op is none: the attempt got a response.
//
// Every property of an Op is read from one table (ops), so that the
// registry's stages, its errors and every observer agree.
type Op uint8

// The ops, in the order of the pipeline: refusals before any I/O, then
// the phases of an attempt, then the deadlines and the body.
const (
	opNone           Op = iota
	OpClosed            // the registry was closed
	OpRequest           // the request is refused before any I/O (bad URL, another origin, a path above BASE_URL); not retried
	OpBudget            // the caller's budget was spent before any I/O
	OpBulkhead          // no bulkhead permit (bulkhead.ErrFull)
	OpBreaker           // the circuit breaker is open, or half-open with every probe taken: no I/O
	OpForcedOpen        // an operator forced the breaker open: no I/O
	OpRateLimit         // the system's rate limit had no token in time: no I/O
	OpConnect           // the TCP connect failed
	OpConnectTimeout    // no TCP handshake within CONNECT_TIMEOUT
	OpTLSTimeout        // no TLS handshake within TLS_HANDSHAKE_TIMEOUT
	OpTLS               // a certificate or TLS alert error; not retried
	OpReadTimeout       // no response headers within READ_TIMEOUT
	OpTransport         // any other transport error
	OpStatus            // the call gave up on a temporary status
	OpCallTimeout       // CALL_TIMEOUT passed
	OpBudgetTimeout     // the caller's deadline (less the reserve) passed
	OpIdleTimeout       // a stream's body stayed idle longer than its bound
	OpCanceled          // the caller cancelled
	OpBodyClosed        // a read of a response body already closed
	numOps
)

// opRow is one row of the table of ops.
type opRow struct {
	name string
	is   opFlag
	// refused is the outcome of a call the op ends before any attempt;
	// 0 for the ops that end attempts.
	refused Outcome
	// reason is what a refusal response says (HTTPClient); "" when the
	// op is not a refusal an SDK must be told of.
	reason string
}

// opFlag is a property of an op.
type opFlag uint8

const (
	retried  opFlag = 1 << iota // another attempt may cure it (the request being replayable)
	failure                     // the breaker counts it as a failure; without it, excluded
	timeout                     // a deadline of some phase fired
	deadline                    // the call's own deadline, passed during the call or before it
	load                        // it tells of the upstream's load (the adaptive bulkhead learns from it)
)

// ops is the table: one row for each way an attempt or a call ends
// without a response. A refusal has one name, spelled as each medium
// wants it: its outcome's label in metrics and logs (breaker_open), the
// op's name in errors and error.type (breaker open), the reason of a
// refusal response (breaker-open); a test holds the three together.
var ops = [numOps]opRow{
	opNone:           {"", 0, 0, ""},
	OpClosed:         {"closed", 0, 0, ""},
	OpRequest:        {"request", 0, 0, ""},
	OpBudget:         {"budget spent", deadline, OutcomeBudgetSpent, "budget-spent"},
	OpBulkhead:       {"bulkhead full", 0, OutcomeBulkheadFull, "bulkhead-full"},
	OpBreaker:        {"breaker open", 0, OutcomeBreakerOpen, "breaker-open"},
	OpForcedOpen:     {"forced open", 0, OutcomeForcedOpen, "forced-open"},
	OpRateLimit:      {"rate limited", 0, OutcomeRateLimited, "rate-limited"},
	OpConnect:        {"connect", retried | failure | load, 0, ""},
	OpConnectTimeout: {"connect timeout", retried | failure | timeout | load, 0, ""},
	OpTLSTimeout:     {"tls handshake timeout", retried | failure | timeout | load, 0, ""},
	OpTLS:            {"tls", failure, 0, ""},
	OpReadTimeout:    {"read timeout", retried | failure | timeout | load, 0, ""},
	OpTransport:      {"transport", retried | failure | load, 0, ""},
	OpStatus:         {"status", failure | load, 0, ""},
	OpCallTimeout:    {"call timeout", failure | timeout | deadline | load, 0, ""},
	// The caller's deadline: a failure of the upstream only when the
	// attempt had a fair chance, which the breaker stage judges. A call
	// it cuts is answered as a spent budget (an SDK's retry could only
	// overrun it).
	OpBudgetTimeout: {"budget timeout", failure | timeout | deadline, 0, "budget-spent"},
	OpIdleTimeout:   {"idle timeout", failure | timeout | load, 0, ""},
	OpCanceled:      {"canceled", 0, OutcomeCanceled, ""},
	OpBodyClosed:    {"body closed", 0, 0, ""},
}

// String is the op's name as errors and logs say it ("connect timeout");
// "" for the zero Op.
func (op Op) String() string { return op.row().name }

// Retryable reports whether another attempt may cure what op ended: the
// registry retries it when the request is safe to replay.
func (op Op) Retryable() bool { return op.row().is&retried != 0 }

// Verdict is how the circuit breaker counts an attempt op ended.
func (op Op) Verdict() Verdict {
	switch {
	case op == opNone:
		return VerdictSuccess
	case op.row().is&failure != 0:
		return VerdictFailure
	}
	return VerdictExcluded
}

// Timeout reports whether op is a timeout of some phase, as net.Error's
// Timeout does.
func (op Op) Timeout() bool { return op.row().is&timeout != 0 }

// Deadline reports whether op is the call's deadline, passed during the
// call or before it: its errors match context.DeadlineExceeded.
func (op Op) Deadline() bool { return op.row().is&deadline != 0 }

// Load reports whether an attempt op ended tells of the upstream's load,
// for the adaptive bulkhead: a timeout or a transport error does; the
// caller's cancellation, a refusal or a bad request does not.
func (op Op) Load() bool { return op.row().is&load != 0 }

// Reason returns what a refusal response says for a call op ended
// before anything was sent ("breaker-open"), or "" when op is not such a
// refusal.
func (op Op) Reason() string { return op.row().reason }

// Outcome is how an attempt or a call that op ended is labelled: a
// refusal's own outcome (breaker_open, bulkhead_full, ...), canceled for
// the caller's cancellation, gave_up for the call's deadline, and for any
// other failure retry, or gave_up when last says no attempt follows.
func (op Op) Outcome(last bool) Outcome {
	r := op.row()
	switch {
	case r.refused != 0:
		return r.refused
	case r.is&deadline != 0 || last:
		return OutcomeGaveUp
	}
	return OutcomeRetry
}

// OpOfReason returns the op whose refusal reason is reason: the inverse
// of [Op.Reason].
func OpOfReason(reason string) (Op, bool) {
	for op := range numOps {
		if reason != "" && ops[op].reason == reason && ops[op].refused != 0 {
			return op, true
		}
	}
	return 0, false
}

// OpOfName returns the op named name: the inverse of [Op.String].
func OpOfName(name string) (Op, bool) {
	for op := range numOps {
		if name != "" && ops[op].name == name {
			return op, true
		}
	}
	return 0, false
}

func (op Op) row() *opRow {
	if op < numOps {
		return &ops[op]
	}
	return &ops[opNone]
}

// Verdict is how the circuit breaker counts an attempt.
type Verdict uint8

// The verdicts.
const (
	// VerdictExcluded is neither a success nor a failure: the caller
	// cancelled, the request was bad before any I/O, the caller's budget
	// left the attempt no fair chance, or the attempt was refused.
	VerdictExcluded Verdict = iota
	// VerdictSuccess is any response not counted as a failure.
	VerdictSuccess
	// VerdictFailure is a transport error, an attempt timeout or a status
	// the upstream failed with (408, 429, 5xx).
	VerdictFailure
)
