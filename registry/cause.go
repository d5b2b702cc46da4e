// Causes: the causes of a failed call joined into one error that reads
// as one sentence: the transport's error and the reason the call's
// context ended (CALL_TIMEOUT, the caller's budget, a stream's idle
// bound), or a refusal and the failure that preceded it. The registry's
// errors carry what it joins.

package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// withCause joins err with the context's cause when the context ended.
func withCause(err error, ctx context.Context) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if errors.Is(err, cause) {
		return err
	}
	if _, ok := streamTimeout(ctx); ok && errors.Is(err, context.Canceled) {
		// A stream's timer cancelled the call, not the caller: the
		// transport's "context canceled" would say otherwise.
		return cause
	}
	return joinCauses(err, cause)
}

// joined is errors.Join on one line: its causes separated by "; ", so that
// an error reads as one sentence in a log line.
type joined []error

// joinCauses joins two causes; either may be nil.
func joinCauses(a, b error) error {
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

// causeSentence is what an error of a call says: the system, the request, the
// stage (the op), the attempts, the last status and its Retry-After, and
// the cause.
type causeSentence struct {
	System, Method, URL string // Method and URL: empty to leave the request out
	Op                  observe.Op
	Attempts            int
	StatusCode          int
	RetryAfter          time.Duration
	Cause               error
	Alone               bool // the cause names its stage: the op is not said
}

// String reads as one sentence, each thing said once:
//
//	outbound payments: bulkhead full
//	outbound payments: GET "https://pay.example/v1/x": call timeout after 3 attempts (last status 503): ...
func (s causeSentence) String() string {
	var b strings.Builder
	b.WriteString("outbound ")
	b.WriteString(s.System)
	b.WriteString(": ")
	if s.Method != "" {
		b.WriteString(s.Method)
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(s.URL))
		b.WriteString(": ")
	}
	cause := ""
	if s.Cause != nil {
		cause = s.Cause.Error()
		// The sentinels of this module start with their package's name;
		// the stage says it already.
		for _, p := range [...]string{"outbound: ", "bulkhead: ", "capbudget: "} {
			cause = strings.TrimPrefix(cause, p)
		}
	}
	if op := s.Op.String(); cause == op || strings.HasSuffix(op, " "+cause) {
		cause = "" // "call timeout: call timeout", "bulkhead full: full"
	}
	if !s.Alone {
		b.WriteString(s.Op.String())
	}
	if s.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", s.Attempts)
	}
	switch {
	case s.StatusCode != 0 && s.RetryAfter > 0:
		fmt.Fprintf(&b, " (last status %d, retry after %v)", s.StatusCode, s.RetryAfter)
	case s.StatusCode != 0:
		fmt.Fprintf(&b, " (last status %d)", s.StatusCode)
	}
	if cause != "" {
		if !s.Alone {
			b.WriteString(": ")
		}
		b.WriteString(cause)
	}
	return b.String()
}
