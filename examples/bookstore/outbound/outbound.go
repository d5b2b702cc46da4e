package outbound

import (
	"context"
	"errors"
	"fmt"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/examples/bookstore/domain"
)

// Stock implements domain.StockChecker over the inventory adapter.
type Stock struct{ a *inventory.Adapter }

// NewStock returns the inventory port.
func NewStock(a *inventory.Adapter) Stock { return Stock{a} }

var _ domain.StockChecker = Stock{}

// Stock implements domain.StockChecker.
func (s Stock) Stock(ctx context.Context, isbn string) (int, error) {
	n, err := s.a.Stock(ctx, isbn)
	if err != nil {
		return 0, translate(ctx, inventory.Name, err)
	}
	return n, nil
}

// Payments implements domain.PaymentRegistrar over the payments adapter,
// which sends Idempotency-Key order-<orderID>.
type Payments struct{ a *payments.Adapter }

// NewPayments returns the payments port.
func NewPayments(a *payments.Adapter) Payments { return Payments{a} }

var _ domain.PaymentRegistrar = Payments{}

// Register implements domain.PaymentRegistrar.
func (p Payments) Register(ctx context.Context, orderID string, amountCents int64) (string, error) {
	id, err := p.a.Register(ctx, orderID, amountCents)
	if err != nil {
		return "", translate(ctx, payments.Name, err)
	}
	return id, nil
}

// translate turns an adapter's error into the domain's; see the package
// doc for the order.
func translate(ctx context.Context, system string, err error) error {
	switch {
	case errors.Is(err, capbudget.ErrExhausted) || ctx.Err() != nil:
		return fmt.Errorf("%w: %w", domain.ErrNoTime, err)
	case errors.Is(err, inventory.ErrUnknownBook):
		return fmt.Errorf("%w: %w", domain.ErrUnknownBook, err)
	case errors.Is(err, payments.ErrDeclined):
		return fmt.Errorf("%w: %w", domain.ErrPaymentDeclined, err)
	case adapters.Degradable(err):
		u := &domain.UnavailableError{System: system, Err: err}
		var se *adapters.StatusError
		if errors.As(err, &se) && se.HasRetryAfter {
			u.RetryAfter = se.RetryAfter
		}
		return u
	}
	return err
}
