package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// Name is the system's name: its variables are INVENTORY_*.
const Name = "inventory"

// System declares the inventory system with its code defaults. The
// environment (INVENTORY_READ_TIMEOUT, ...) overrides any of them; the
// rest of its settings are the baseline (config.Baseline).
var System = config.System{
	Name: Name,
	Defaults: config.Client{
		// A stock check is a key lookup in the same data centre: it
		// answers in milliseconds, and an order waits on it. Wait 2s for
		// the first byte instead of the baseline 10s, so a stuck inventory
		// fails (and trips the breaker) while the customer is still there.
		ReadTimeout: 2 * time.Second,
		// connect < read and TLS <= read are rules: both shrink with the
		// read timeout. 500ms connects within one data centre.
		ConnectTimeout:      500 * time.Millisecond,
		TLSHandshakeTimeout: time.Second,
		// call >= connect + read + 1s; 5s leaves room for one retry after
		// a read timeout (baseline 2 retries, each within the call).
		CallTimeout: 5 * time.Second,
	},
}

// ErrUnknownBook matches the error of [Adapter.Stock] for an ISBN the
// inventory does not know (a 404).
var ErrUnknownBook = errors.New("inventory: unknown book")

// StockChecker is the port [*Adapter] implements: the number of copies of
// a book available now. See the package doc for why the domain declares
// its own copy.
type StockChecker interface {
	Stock(ctx context.Context, isbn string) (int, error)
}

var _ StockChecker = (*Adapter)(nil)

// Adapter calls the inventory system through its registry client. It is
// safe for concurrent use.
type Adapter struct {
	c *registry.Client
}

// New returns an adapter over c, the inventory system's client.
func New(c *registry.Client) *Adapter { return &Adapter{c: c} }

// stockResponse is the body of GET /stock/{isbn}.
type stockResponse struct {
	ISBN      string `json:"isbn"`
	Available *int   `json:"available"`
}

// Stock returns the copies of isbn available now. It fails with an error
// matching [ErrUnknownBook] for an ISBN the inventory does not know, the
// adapters package's errors for every other failure (use
// adapters.Degradable to decide whether to fall back), and an error for an
// answer without a non-negative "available".
func (a *Adapter) Stock(ctx context.Context, isbn string) (int, error) {
	if isbn == "" {
		return 0, fmt.Errorf("%w: empty ISBN", ErrUnknownBook)
	}
	var r stockResponse
	if err := adapters.GetJSON(ctx, a.c, []string{"stock", isbn}, &r); err != nil {
		if errors.Is(err, adapters.ErrNotFound) {
			return 0, fmt.Errorf("%w %q: %w", ErrUnknownBook, isbn, err)
		}
		return 0, err
	}
	switch {
	case r.Available == nil:
		return 0, fmt.Errorf("inventory: stock of %q: answer has no \"available\"", isbn)
	case *r.Available < 0:
		return 0, fmt.Errorf("inventory: stock of %q: available is %d, want >= 0", isbn, *r.Available)
	}
	return *r.Available, nil
}
