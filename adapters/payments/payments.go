package payments

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// Name is the system's name: its variables are PAYMENTS_*.
const Name = "payments"

// System declares the payment provider with its code defaults. The
// environment (PAYMENTS_READ_TIMEOUT, ...) overrides any of them; the rest
// are the baseline (config.Baseline).
var System = config.System{
	Name: Name,
	Defaults: config.Client{
		// Payment providers are legitimately slow: they call card
		// networks and fraud checks before they answer, and a p99 of
		// several seconds is normal. Wait 20s for the first byte instead
		// of the baseline 10s. The config refuses more than 60s: a
		// provider that needs longer should answer 202 with a payment to
		// poll, and this adapter would poll instead of waiting.
		ReadTimeout: 20 * time.Second,
		// The whole call, retries included: >= connect + read + 1s
		// (2s + 20s + 1s); 30s also gives a quick 503 room for a retry.
		// A shorter caller deadline (X-Time-Budget) still wins.
		CallTimeout: 30 * time.Second,
		// Retries stay at the baseline (2) only because every request
		// carries an Idempotency-Key: without one the registry never
		// replays a POST, and a retried payment could charge twice.
	},
}

// ErrDeclined matches the error of [Adapter.Register] when the provider
// refused the payment (402 or 422): retrying will not help, the customer
// must pay another way.
var ErrDeclined = errors.New("payments: payment declined")

// Registrar is the port [*Adapter] implements: register the payment of an
// order and return the provider's payment ID.
type Registrar interface {
	Register(ctx context.Context, orderID string, amountCents int64) (paymentID string, err error)
}

var _ Registrar = (*Adapter)(nil)

// Adapter calls the payment provider through its registry client. It is
// safe for concurrent use.
type Adapter struct {
	c *registry.Client
}

// New returns an adapter over c, the payments system's client.
func New(c *registry.Client) *Adapter { return &Adapter{c: c} }

// registerRequest is the body of POST /payments.
type registerRequest struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// registerResponse is the provider's answer.
type registerResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// IdempotencyKey returns the Idempotency-Key of an order's payment:
// "order-<id>". It depends on the order alone, so every attempt, and every
// later call for the same order, carries the same key.
func IdempotencyKey(orderID string) string { return "order-" + orderID }

// Register registers the payment of amountCents for orderID and returns
// the provider's payment ID. A 503, a 429 or a timeout is retried by the
// registry with the same body and Idempotency-Key. It fails with an error
// matching [ErrDeclined] when the provider refuses the payment, and with
// the adapters package's errors otherwise (adapters.Degradable says
// whether the provider is unavailable for now).
func (a *Adapter) Register(ctx context.Context, orderID string, amountCents int64) (string, error) {
	if orderID == "" {
		return "", errors.New("payments: empty order ID")
	}
	if amountCents <= 0 {
		return "", fmt.Errorf("payments: order %s: amount %d cents, want > 0", orderID, amountCents)
	}
	var out registerResponse
	err := adapters.DoJSON(ctx, a.c, adapters.Request{Method: http.MethodPost, Path: []string{"payments"},
		In: registerRequest{OrderID: orderID, AmountCents: amountCents}, Out: &out},
		adapters.WithIdempotencyKey(IdempotencyKey(orderID)))
	if err != nil {
		var se *adapters.StatusError
		if errors.As(err, &se) && (se.StatusCode == http.StatusPaymentRequired || se.StatusCode == http.StatusUnprocessableEntity) {
			return "", fmt.Errorf("%w: order %s: %w", ErrDeclined, orderID, err)
		}
		return "", err
	}
	if out.ID == "" {
		return "", fmt.Errorf("payments: order %s: answer has no payment id", orderID)
	}
	return out.ID, nil
}
