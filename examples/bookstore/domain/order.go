package domain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The errors of [Service.PlaceOrder]. Ports return them (wrapped or not)
// so that the domain can decide without knowing any adapter.
var (
	// ErrInvalidOrder: the order itself is wrong (no ISBN, bad quantity).
	ErrInvalidOrder = errors.New("invalid order")
	// ErrUnknownBook: the inventory does not know the ISBN.
	ErrUnknownBook = errors.New("unknown book")
	// ErrOutOfStock: fewer copies are available than ordered.
	ErrOutOfStock = errors.New("out of stock")
	// ErrPaymentDeclined: the provider refused the payment.
	ErrPaymentDeclined = errors.New("payment declined")
	// ErrUnavailable matches every [*UnavailableError].
	ErrUnavailable = errors.New("unavailable")
	// ErrNoTime: the caller's time budget ran out before the order could
	// be placed; nobody is waiting for the answer any more.
	ErrNoTime = errors.New("no time left for the order")
)

// UnavailableError says a system the order needs cannot answer now (its
// breaker is open, its bulkhead is full, it timed out or answered 5xx).
// The order was not placed; the caller may try again later with the same
// order ID.
type UnavailableError struct {
	System string
	// RetryAfter is the upstream's hint, 0 when it gave none.
	RetryAfter time.Duration
	Err        error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s unavailable: %v", e.System, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) hold.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// StockChecker is the port to the inventory: how many copies of isbn are
// available now. It fails with [ErrUnknownBook], a [*UnavailableError] or
// [ErrNoTime].
type StockChecker interface {
	Stock(ctx context.Context, isbn string) (int, error)
}

// PaymentRegistrar is the port to the payment provider: register the
// payment of an order and return the provider's payment ID. Registering
// the same order twice must charge once (the implementation derives an
// idempotency key from orderID). It fails with [ErrPaymentDeclined], a
// [*UnavailableError] or [ErrNoTime].
type PaymentRegistrar interface {
	Register(ctx context.Context, orderID string, amountCents int64) (paymentID string, err error)
}

// Order is a placed order.
type Order struct {
	ID          string `json:"id"`
	ISBN        string `json:"isbn"`
	Qty         int    `json:"qty"`
	AmountCents int64  `json:"amount_cents"`
	PaymentID   string `json:"payment_id"`
	Status      string `json:"status"` // "paid"
}

// MaxQty is the largest quantity of one order.
const MaxQty = 100

// Service places orders. It is safe for concurrent use.
type Service struct {
	stock      StockChecker
	pay        PaymentRegistrar
	priceCents int64
}

// NewService returns a service over the two ports, selling every book at
// priceCents.
func NewService(stock StockChecker, pay PaymentRegistrar, priceCents int64) *Service {
	return &Service{stock: stock, pay: pay, priceCents: priceCents}
}

// PlaceOrder checks that qty copies of isbn are in stock, then registers
// the payment of order id, and returns the paid order.
//
// The stock check comes first because it is cheap and a refusal there
// costs the customer nothing. Nothing is stored before the payment
// succeeds: when payments is unavailable the order is refused (a
// [*UnavailableError]) rather than accepted unpaid, and the caller retries
// with the same id, which the payment port turns into the same
// idempotency key, so a payment that did go through before a timeout is
// not charged twice.
func (s *Service) PlaceOrder(ctx context.Context, id, isbn string, qty int) (Order, error) {
	switch {
	case id == "":
		return Order{}, fmt.Errorf("%w: no order id", ErrInvalidOrder)
	case isbn == "":
		return Order{}, fmt.Errorf("%w: no isbn", ErrInvalidOrder)
	case qty < 1 || qty > MaxQty:
		return Order{}, fmt.Errorf("%w: qty %d, want 1..%d", ErrInvalidOrder, qty, MaxQty)
	}
	n, err := s.stock.Stock(ctx, isbn)
	if err != nil {
		return Order{}, fmt.Errorf("stock of %s: %w", isbn, err)
	}
	if n < qty {
		return Order{}, fmt.Errorf("%w: %d of %s wanted, %d available", ErrOutOfStock, qty, isbn, n)
	}
	o := Order{ID: id, ISBN: isbn, Qty: qty, AmountCents: int64(qty) * s.priceCents}
	o.PaymentID, err = s.pay.Register(ctx, o.ID, o.AmountCents)
	if err != nil {
		return Order{}, fmt.Errorf("payment of order %s: %w", o.ID, err)
	}
	o.Status = "paid"
	return o, nil
}
