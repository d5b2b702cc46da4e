package outbound

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/examples/bookstore/domain"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTranslate(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	rejected := func(op observe.Op, err error) error { return &registry.Error{System: "payments", Op: op, Err: err} }
	tests := []struct {
		name       string
		ctx        context.Context
		err        error
		want       error // errors.Is target; nil: the error comes back as is
		retryAfter time.Duration
	}{
		{"budget spent", live, rejected(observe.OpBudget, capbudget.ErrExhausted), domain.ErrNoTime, 0},
		{"caller gone", cancelled, rejected(observe.OpCanceled, context.Canceled), domain.ErrNoTime, 0},
		{"unknown book", live, fmt.Errorf("%w %q", inventory.ErrUnknownBook, "1"), domain.ErrUnknownBook, 0},
		{"declined", live, fmt.Errorf("%w: order 1", payments.ErrDeclined), domain.ErrPaymentDeclined, 0},
		{"breaker open", live, rejected(observe.OpBreaker, registry.ErrCircuitOpen), domain.ErrUnavailable, 0},
		{"bulkhead full", live, rejected(observe.OpBulkhead, bulkhead.ErrFull), domain.ErrUnavailable, 0},
		{"read timeout", live, rejected(observe.OpReadTimeout, nil), domain.ErrUnavailable, 0},
		{"503 with a hint", live, &adapters.StatusError{StatusCode: 503, RetryAfter: 7 * time.Second, HasRetryAfter: true}, domain.ErrUnavailable, 7 * time.Second},
		{"400 is a bug", live, &adapters.StatusError{StatusCode: 400}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := translate(tt.ctx, "payments", tt.err)
			if tt.want == nil {
				if got != tt.err {
					t.Errorf("translate = %v, want the error as is", got)
				}
				return
			}
			if !errors.Is(got, tt.want) {
				t.Fatalf("translate = %v, want one matching %v", got, tt.want)
			}
			if !errors.Is(got, tt.err) && !errors.Is(got, errors.Unwrap(tt.err)) {
				t.Errorf("translate = %v lost the cause %v", got, tt.err)
			}
			var u *domain.UnavailableError
			if errors.As(got, &u) && (u.System != "payments" || u.RetryAfter != tt.retryAfter) {
				t.Errorf("UnavailableError{%s, %v}, want {payments, %v}", u.System, u.RetryAfter, tt.retryAfter)
			}
		})
	}
}
