package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/examples/bookstore/domain"
	"github.com/outbound-go/outbound/examples/bookstore/httpapi"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type stock struct {
	n   int
	err error
}

func (s stock) Stock(context.Context, string) (int, error) { return s.n, s.err }

type pay struct {
	err error
	ids *[]string
}

func (p pay) Register(_ context.Context, id string, _ int64) (string, error) {
	*p.ids = append(*p.ids, id)
	return "pay_1", p.err
}

func TestPlaceOrder(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		header     map[string]string
		stock      stock
		payErr     error
		wantStatus int
		wantCode   string
		retryAfter string
		wantPaid   int
	}{
		{name: "paid", body: `{"isbn":"1","qty":2}`, stock: stock{n: 5}, wantStatus: 201, wantPaid: 1},
		{name: "out of stock", body: `{"isbn":"1","qty":2}`, stock: stock{n: 1}, wantStatus: 409, wantCode: "out_of_stock"},
		{name: "unknown book", body: `{"isbn":"1","qty":1}`, stock: stock{err: domain.ErrUnknownBook}, wantStatus: 404, wantCode: "unknown_book"},
		{name: "declined", body: `{"isbn":"1","qty":1}`, stock: stock{n: 1}, payErr: domain.ErrPaymentDeclined, wantStatus: 402, wantCode: "payment_declined", wantPaid: 1},
		{name: "payments down, no hint", body: `{"isbn":"1","qty":1}`, stock: stock{n: 1},
			payErr:     &domain.UnavailableError{System: "payments", Err: errors.New("breaker open")},
			wantStatus: 503, wantCode: "payments_unavailable", retryAfter: "5", wantPaid: 1},
		{name: "inventory down, hint 2.5s", body: `{"isbn":"1","qty":1}`,
			stock:      stock{err: &domain.UnavailableError{System: "inventory", RetryAfter: 2500 * time.Millisecond}},
			wantStatus: 503, wantCode: "inventory_unavailable", retryAfter: "3"},
		{name: "no time", body: `{"isbn":"1","qty":1}`, stock: stock{err: domain.ErrNoTime}, wantStatus: 504, wantCode: "no_time_left"},
		{name: "budget header 0", body: `{"isbn":"1","qty":1}`, header: map[string]string{"X-Time-Budget": "0"}, stock: stock{n: 1}, wantStatus: 504},
		{name: "bug upstream", body: `{"isbn":"1","qty":1}`, stock: stock{err: errors.New("decode response: EOF")}, wantStatus: 500, wantCode: "internal"},
		{name: "bad json", body: `{"isbn":`, wantStatus: 400, wantCode: "bad_request"},
		{name: "unknown field", body: `{"isbn":"1","qty":1,"price":0}`, wantStatus: 400, wantCode: "bad_request"},
		{name: "qty 0", body: `{"isbn":"1","qty":0}`, stock: stock{n: 1}, wantStatus: 400, wantCode: "invalid_order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			h := httpapi.Handler(domain.NewService(tt.stock, pay{tt.payErr, &ids}, 1999), slog.New(slog.NewTextHandler(io.Discard, nil)))
			req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tt.wantStatus)
			}
			if tt.wantCode != "" {
				var body struct{ Error, Message string }
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error != tt.wantCode {
					t.Errorf("body %s, want error %q", rec.Body, tt.wantCode)
				}
				if rec.Code >= 500 && strings.Contains(body.Message, "EOF") {
					t.Errorf("a 5xx message shows the internal error: %q", body.Message)
				}
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if len(ids) != tt.wantPaid {
				t.Errorf("%d payments registered, want %d", len(ids), tt.wantPaid)
			}
		})
	}
}

func TestOrderIDFromIdempotencyKey(t *testing.T) {
	var ids []string
	h := httpapi.Handler(domain.NewService(stock{n: 9}, pay{nil, &ids}, 1), slog.New(slog.NewTextHandler(io.Discard, nil)))
	post := func(key string) {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"isbn":"1","qty":1}`))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 201 {
			t.Fatalf("status %d %s", rec.Code, rec.Body)
		}
	}
	post("cart-1")
	post("cart-1")
	post("cart-2")
	post("")
	post("")
	if ids[0] != ids[1] || ids[0] == ids[2] || ids[3] == ids[4] {
		t.Errorf("order ids %q: want the same id for the same key, different ones otherwise", ids)
	}

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/orders", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /orders: %d, want 405", rec.Code)
	}
}
