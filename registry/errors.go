package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/observe"
)

var (
	// ErrUnknownSystem is returned by [Registry.Client] for a name that
	// was not declared.
	ErrUnknownSystem = errors.New("outbound: unknown system")
	// ErrCircuitOpen matches calls rejected by an open (or saturated
	// half-open) circuit breaker. It wraps gobreaker's ErrOpenState or
	// ErrTooManyRequests.
	ErrCircuitOpen = errors.New("outbound: circuit open")
	// ErrClosed matches calls made after [Registry.Close].
	ErrClosed = errors.New("outbound: registry closed")
	// ErrRetryBudget matches a call that stopped retrying because the
	// system's retry budget was spent.
	ErrRetryBudget = errors.New("outbound: retry budget spent")
	// ErrPathEscapesBase matches a relative request URL whose ".."
	// segments would climb above BASE_URL's path; nothing is sent.
	ErrPathEscapesBase = errors.New("outbound: relative path climbs above BASE_URL")
)

// Error is the error of a call that did not return a response. It names
// the system and the stage that failed, and unwraps to the cause: the
// package sentinels, bulkhead.ErrFull, capbudget.ErrExhausted, the
// transport's error, context errors.
type Error struct {
	System   string
	Op       observe.Op
	Method   string // empty for fast failures
	URL      string // redacted; empty for fast failures
	Attempts int    // attempts sent; 0 when nothing was sent
	// StatusCode is the last temporary status seen when the call gave up
	// on a status it could not retry in time (e.g. 429 with a Retry-After
	// past the deadline); 0 otherwise.
	StatusCode int
	// RetryAfter is the upstream's Retry-After hint on that status, when
	// the call gave up because waiting for it would pass the deadline; 0
	// when there was none.
	RetryAfter time.Duration
	Err        error

	inURLError bool // wrapped by net/http's *url.Error, which names Method and URL
}

// Error reads as one sentence: the system, the request (unless net/http's
// *url.Error around it names it already), the stage, and the cause, each
// said once:
//
//	outbound payments: bulkhead: full
//	outbound payments: GET "https://pay.example/v1/x": call timeout after 3 attempts (last status 503): ...
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("outbound ")
	b.WriteString(e.System)
	b.WriteString(": ")
	if e.Method != "" && !e.inURLError {
		b.WriteString(e.Method)
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.URL))
		b.WriteString(": ")
	}
	cause := ""
	if e.Err != nil {
		cause = e.Err.Error()
		// The sentinels of this module start with their package's name;
		// the stage says it already.
		for _, p := range [...]string{"outbound: ", "bulkhead: ", "capbudget: "} {
			cause = strings.TrimPrefix(cause, p)
		}
	}
	if cause == e.Op.String() {
		cause = "" // "call timeout: call timeout"
	}
	// A sentinel that names its stage ("registry closed", "time budget
	// exhausted") stands alone.
	stage := e.Err != ErrClosed && e.Err != capbudget.ErrExhausted && e.Err != errReadAfterClose
	if stage {
		b.WriteString(e.Op.String())
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	switch {
	case e.StatusCode != 0 && e.RetryAfter > 0:
		fmt.Fprintf(&b, " (last status %d, retry after %v)", e.StatusCode, e.RetryAfter)
	case e.StatusCode != 0:
		fmt.Fprintf(&b, " (last status %d)", e.StatusCode)
	}
	if cause != "" {
		if stage {
			b.WriteString(": ")
		}
		b.WriteString(cause)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes a call that ran out of time, or was refused because the
// caller's budget was already spent, match context.DeadlineExceeded, as
// http.Client's Timeout errors do, whatever the cause that fired
// (capbudget.ErrCallTimeout or capbudget.ErrExhausted).
func (e *Error) Is(target error) bool {
	return target == context.DeadlineExceeded && (e.Op == observe.OpCallTimeout || e.Op == observe.OpBudgetTimeout || e.Op == observe.OpBudget)
}

// Timeout reports whether the call failed on a timeout of any phase, as
// net.Error does.
func (e *Error) Timeout() bool {
	switch e.Op {
	case observe.OpConnectTimeout, observe.OpTLSTimeout, observe.OpReadTimeout, observe.OpCallTimeout, observe.OpBudgetTimeout, observe.OpIdleTimeout:
		return true
	}
	return false
}

// joined is errors.Join on one line: its causes separated by "; ", so that
// an error reads as one sentence in a log line.
type joined []error

// join joins two causes; either may be nil.
func join(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return joined{a, b}
}

func (j joined) Error() string {
	var b strings.Builder
	for i, err := range j {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.TrimPrefix(err.Error(), "capbudget: "))
	}
	return b.String()
}

func (j joined) Unwrap() []error { return j }
