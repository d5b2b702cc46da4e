package capbudget

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// maxDigits bounds how many digits ParseHeader reads: one more than
// MaxBudget needs, so that leading zeros are tolerated without reading an
// unbounded value. Longer inputs are rejected before any arithmetic, so the
// accumulator can never overflow.
const maxDigits = 18

// SetHeader sets h[Header] to the whole milliseconds left before ctx's
// deadline, rounded down, as a plain decimal integer (see
// [AppendHeaderValue]). When ctx has no deadline the header is deleted, so
// a stale budget is never forwarded. Any previous values of the header are
// replaced. ctx comes first, as in every function of this module that
// takes one.
//
// SetHeader formats the number into a stack buffer and allocates only the
// header's value string and slice.
func SetHeader(ctx context.Context, h http.Header) {
	var buf [maxDigits]byte
	v, ok := AppendHeaderValue(ctx, buf[:0])
	if !ok {
		delete(h, Header)
		return
	}
	h[Header] = []string{string(v)}
}

// AppendHeaderValue appends to dst the [Header] value for ctx's deadline:
// the whole milliseconds left, rounded down, as a plain decimal integer. A
// deadline that has already passed is written as 0, which tells the
// receiver that the caller has given up, and more than [MaxBudget] is
// written as MaxBudget so that [ParseHeader] on the receiving side always
// accepts the value. It appends at most 18 bytes. ok is false, and dst is
// returned unchanged, when ctx has no deadline.
//
// It is the one formatter of the header: [SetHeader] and the registry's
// attempts both use it.
func AppendHeaderValue(ctx context.Context, dst []byte) (_ []byte, ok bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return dst, false
	}
	ms := time.Until(deadline).Milliseconds() // truncates; floor for >= 0
	ms = min(max(ms, 0), maxBudgetMillis)
	return strconv.AppendInt(dst, ms, 10), true
}

// ParseHeader parses an X-Time-Budget value: a non-negative decimal integer
// of milliseconds made of ASCII digits only (no sign, spaces, fraction,
// unit or base prefix; leading zeros are allowed up to 18 characters in
// all), at most [MaxBudget].
//
// Values above MaxBudget are rejected, not clamped: a budget of hours is
// not something a well-behaved caller sends, and honouring it would let a
// client pin server resources. Every error names the header. A budget of 0
// is valid and means the caller has already given up.
func ParseHeader(v string) (time.Duration, error) {
	if v == "" {
		return 0, headerError(v, "empty value")
	}
	if len(v) > maxDigits {
		return 0, headerError(v, "too long")
	}
	var ms int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, headerError(v, "want a non-negative integer of milliseconds")
		}
		ms = ms*10 + int64(c-'0')
	}
	if ms > maxBudgetMillis {
		return 0, headerError(v, "exceeds the maximum of "+MaxBudget.String())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// headerError builds a ParseHeader error that names the header and quotes
// (at most the first 32 bytes of) the offending value.
func headerError(v, reason string) error {
	const maxQuoted = 32
	suffix := ""
	if len(v) > maxQuoted {
		v, suffix = v[:maxQuoted], "..."
	}
	return fmt.Errorf("capbudget: invalid %s header %q%s: %s", Header, v, suffix, reason)
}

// Middleware is inbound net/http middleware that honours the caller's
// budget. It is MiddlewareWith(next, MaxBudget).
//
// When the request carries a valid [Header] (as checked by [ParseHeader];
// only the first value counts), next is served with a request whose
// context is bounded by now+budget and whose cause, when that bound fires,
// is [ErrExhausted]. A deadline already on the request's context that is
// sooner is kept as is (with its own cause); the budget never extends it.
//
// A budget of 0 means the caller has already given up: Middleware answers
// 504 Gateway Timeout at once and does not call next.
//
// A missing or malformed header is ignored: next runs with the request
// unchanged. Nothing is logged or counted; a service that wants to observe
// bad headers can call ParseHeader itself.
func Middleware(next http.Handler) http.Handler {
	return MiddlewareWith(next, MaxBudget)
}

// MiddlewareWith is [Middleware] with a limit: a valid budget larger than
// maxBudget is clamped to maxBudget, so a caller cannot make this service
// work longer than it is willing to. A maxBudget <= 0 means no limit beyond
// what ParseHeader accepts ([MaxBudget]).
func MiddlewareWith(next http.Handler, maxBudget time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header[Header]
		if len(values) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		budget, err := ParseHeader(values[0])
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		if budget == 0 {
			http.Error(w, ErrExhausted.Error(), http.StatusGatewayTimeout)
			return
		}
		if maxBudget > 0 {
			budget = min(budget, maxBudget)
		}
		// WithTimeoutCause keeps a sooner deadline already on r's context.
		ctx, cancel := context.WithTimeoutCause(r.Context(), budget, ErrExhausted)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
