package domain_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbound-go/outbound/examples/bookstore/domain"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type stockFunc func(ctx context.Context, isbn string) (int, error)

func (f stockFunc) Stock(ctx context.Context, isbn string) (int, error) { return f(ctx, isbn) }

type payFunc func(ctx context.Context, id string, cents int64) (string, error)

func (f payFunc) Register(ctx context.Context, id string, cents int64) (string, error) {
	return f(ctx, id, cents)
}

func TestPlaceOrder(t *testing.T) {
	down := &domain.UnavailableError{System: "payments", Err: errors.New("breaker open")}
	tests := []struct {
		name     string
		isbn     string
		qty      int
		stock    int
		stockErr error
		payErr   error
		wantErr  error
		wantPaid bool
	}{
		{name: "paid", isbn: "1", qty: 2, stock: 5, wantPaid: true},
		{name: "exactly the stock", isbn: "1", qty: 5, stock: 5, wantPaid: true},
		{name: "out of stock", isbn: "1", qty: 6, stock: 5, wantErr: domain.ErrOutOfStock},
		{name: "unknown book", isbn: "1", qty: 1, stockErr: domain.ErrUnknownBook, wantErr: domain.ErrUnknownBook},
		{name: "inventory down", isbn: "1", qty: 1, stockErr: &domain.UnavailableError{System: "inventory"}, wantErr: domain.ErrUnavailable},
		{name: "payments down", isbn: "1", qty: 1, stock: 1, payErr: down, wantErr: domain.ErrUnavailable},
		{name: "declined", isbn: "1", qty: 1, stock: 1, payErr: domain.ErrPaymentDeclined, wantErr: domain.ErrPaymentDeclined},
		{name: "no time", isbn: "1", qty: 1, stockErr: domain.ErrNoTime, wantErr: domain.ErrNoTime},
		{name: "no isbn", qty: 1, wantErr: domain.ErrInvalidOrder},
		{name: "qty 0", isbn: "1", qty: 0, wantErr: domain.ErrInvalidOrder},
		{name: "qty too large", isbn: "1", qty: domain.MaxQty + 1, wantErr: domain.ErrInvalidOrder},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paid int
			svc := domain.NewService(
				stockFunc(func(context.Context, string) (int, error) { return tt.stock, tt.stockErr }),
				payFunc(func(_ context.Context, id string, cents int64) (string, error) {
					paid++
					if cents != int64(tt.qty)*1999 || id != "o-1" {
						t.Errorf("Register(%q, %d)", id, cents)
					}
					return "pay_1", tt.payErr
				}), 1999)
			o, err := svc.PlaceOrder(context.Background(), "o-1", tt.isbn, tt.qty)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if tt.payErr == nil && paid > 0 {
					t.Errorf("payment registered for a refused order")
				}
				return
			}
			if err != nil || o.Status != "paid" || o.PaymentID != "pay_1" || o.AmountCents != int64(tt.qty)*1999 {
				t.Fatalf("PlaceOrder = %+v, %v", o, err)
			}
		})
	}
}
