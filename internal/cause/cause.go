// Package cause joins the causes of a failed call into one error that
// reads as one sentence: the transport's error and the reason the call's
// context ended (CALL_TIMEOUT, the caller's budget, a stream's idle
// bound), or a refusal and the failure that preceded it. It is internal:
// the registry's errors carry what it joins.
package cause

import (
	"context"
	"errors"
	"strings"

	"github.com/outbound-go/outbound/internal/stream"
)

// With joins err with the context's cause when the context ended.
func With(err error, ctx context.Context) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if errors.Is(err, cause) {
		return err
	}
	if _, ok := stream.Timeout(ctx); ok && errors.Is(err, context.Canceled) {
		// A stream's timer cancelled the call, not the caller: the
		// transport's "context canceled" would say otherwise.
		return cause
	}
	return Join(err, cause)
}

// joined is errors.Join on one line: its causes separated by "; ", so that
// an error reads as one sentence in a log line.
type joined []error

// Join joins two causes; either may be nil.
func Join(a, b error) error {
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
