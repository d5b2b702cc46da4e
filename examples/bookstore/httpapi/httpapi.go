package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/examples/bookstore/domain"
)

const (
	// maxRequestBody bounds the JSON of an order.
	maxRequestBody = 16 << 10
	// orderTimeout bounds an order without an X-Time-Budget: the stock
	// check (5s) plus the payment (30s), the two systems' call timeouts.
	orderTimeout = 35 * time.Second
	// defaultRetryAfter is the hint of a 503 when the upstream gave none:
	// about when a breaker's probes may close it again.
	defaultRetryAfter = 5 * time.Second
)

// Handler returns the API: POST /orders behind capbudget.Middleware, so an
// X-Time-Budget header bounds the request's context.
func Handler(svc *domain.Service, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /orders", capbudget.Middleware(placeOrder(svc, log)))
	return mux
}

type orderRequest struct {
	ISBN string `json:"isbn"`
	Qty  int    `json:"qty"`
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func placeOrder(svc *domain.Service, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), orderTimeout) // never extends a sooner budget
		defer cancel()
		var in orderRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "want a JSON body {\"isbn\": \"...\", \"qty\": n}: "+err.Error())
			return
		}
		id := orderID(r.Header.Get("Idempotency-Key"))
		o, err := svc.PlaceOrder(ctx, id, in.ISBN, in.Qty)
		if err == nil {
			writeJSON(w, http.StatusCreated, o)
			return
		}
		status, code, msg := classify(err, in.ISBN)
		if status >= 500 {
			log.LogAttrs(ctx, slog.LevelWarn, "order refused", slog.String("order", id),
				slog.Int("status", status), slog.String("error", err.Error()))
		}
		var u *domain.UnavailableError
		if errors.As(err, &u) {
			ra := u.RetryAfter
			if ra <= 0 {
				ra = defaultRetryAfter
			}
			secs := strconv.Itoa(int(math.Ceil(ra.Seconds())))
			w.Header().Set("Retry-After", secs)
			msg += "; retry after " + secs + "s with the same Idempotency-Key"
		}
		writeError(w, status, code, msg)
	})
}

// classify maps a domain error to a status, an error code and a message
// for the client. Messages of 5xx name no internal detail: the log has
// the error.
func classify(err error, isbn string) (status int, code, msg string) {
	var u *domain.UnavailableError
	switch {
	case errors.Is(err, domain.ErrNoTime):
		return http.StatusGatewayTimeout, "no_time_left", "the time budget ran out before the order could be placed"
	case errors.Is(err, domain.ErrInvalidOrder):
		return http.StatusBadRequest, "invalid_order", err.Error()
	case errors.Is(err, domain.ErrUnknownBook):
		return http.StatusNotFound, "unknown_book", "no book with ISBN " + strconv.Quote(isbn)
	case errors.Is(err, domain.ErrOutOfStock):
		return http.StatusConflict, "out_of_stock", err.Error()
	case errors.Is(err, domain.ErrPaymentDeclined):
		return http.StatusPaymentRequired, "payment_declined", "the payment was declined"
	case errors.As(err, &u):
		return http.StatusServiceUnavailable, u.System + "_unavailable",
			u.System + " is unavailable now and the order was not placed"
	}
	return http.StatusInternalServerError, "internal", "internal error"
}

// orderID derives the order's ID from the client's Idempotency-Key, so a
// retried request is the same order; without a key it is random.
func orderID(key string) string {
	if key == "" {
		return "o-" + rand.Text()[:16]
	}
	sum := sha256.Sum256([]byte(key))
	return "o-" + hex.EncodeToString(sum[:8])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: code, Message: msg})
}
