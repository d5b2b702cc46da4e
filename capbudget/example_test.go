package capbudget_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/outbound-go/outbound/capbudget"
)

// Check fails fast, without allocating, when the caller's budget is spent.
func ExampleCheck() {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()

	err := capbudget.Check(ctx, capbudget.DefaultReserve)
	fmt.Println(err)
	fmt.Println(err == capbudget.ErrExhausted)
	fmt.Println(capbudget.Check(context.Background(), capbudget.DefaultReserve))
	// Output:
	// capbudget: time budget exhausted
	// true
	// <nil>
}

// A caller with less time left than the reserve gets a context that is
// already done, and context.Cause says why.
func ExampleCapWith() {
	caller, cancelCaller := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelCaller()

	// Keep 30s back for a fallback: nothing is left for this call.
	ctx, cancel := capbudget.CapWith(caller, 2*time.Second, 30*time.Second)
	defer cancel()

	fmt.Println(ctx.Err())
	fmt.Println(errors.Is(context.Cause(ctx), capbudget.ErrExhausted))
	fmt.Println(caller.Err()) // the caller itself is untouched
	// Output:
	// context deadline exceeded
	// true
	// <nil>
}

func ExampleParseHeader() {
	for _, v := range []string{"250", "0", "1.5"} {
		d, err := capbudget.ParseHeader(v)
		fmt.Println(d, err)
	}
	// Output:
	// 250ms <nil>
	// 0s <nil>
	// 0s capbudget: invalid X-Time-Budget header "1.5": want a non-negative integer of milliseconds
}

// A caller that has already given up (budget 0) gets 504 at once.
func ExampleMiddleware() {
	h := capbudget.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("handler ran")
	}))
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	req.Header.Set(capbudget.Header, "0")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// 504
}

func BenchmarkCheckExhausted(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if capbudget.Check(ctx, 2*time.Hour) != capbudget.ErrExhausted {
			b.Fatal("want ErrExhausted")
		}
	}
}

func BenchmarkCheckOK(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if capbudget.Check(ctx, capbudget.DefaultReserve) != nil {
			b.Fatal("want nil")
		}
	}
}

func BenchmarkCapWithDeadline(b *testing.B) {
	caller, cancelCaller := context.WithTimeout(context.Background(), time.Hour)
	defer cancelCaller()
	b.ReportAllocs()
	for b.Loop() {
		_, cancel := capbudget.CapWith(caller, 2*time.Second, capbudget.DefaultReserve)
		cancel()
	}
}

func BenchmarkSetHeader(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		capbudget.SetHeader(ctx, h)
	}
}
