package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
)

// A bulkhead of two permits with no wait: the third caller is turned away at
// once with ErrFull, and a released permit can be taken again.
func Example() {
	b, err := bulkhead.New(2, 0)
	if err != nil {
		fmt.Println("new:", err)
		return
	}
	ctx := context.Background()

	fmt.Println("TryAcquire:", b.TryAcquire())
	fmt.Println("Acquire:", b.Acquire(ctx))
	fmt.Println("TryAcquire when full:", b.TryAcquire())

	err = b.Acquire(ctx)
	fmt.Println("Acquire when full:", err, errors.Is(err, bulkhead.ErrFull))

	fmt.Println("Release:", b.Release())
	fmt.Println("Acquire after Release:", b.Acquire(ctx))
	fmt.Println("in flight:", b.InFlight(), "of", b.Capacity(), "refused:", b.Refused())

	// Output:
	// TryAcquire: true
	// Acquire: <nil>
	// TryAcquire when full: false
	// Acquire when full: bulkhead: full true
	// Release: <nil>
	// Acquire after Release: <nil>
	// in flight: 2 of 2 refused: 2
}

// The usual shape of a guarded outbound call: Acquire before, Release after.
func ExampleBulkhead_Acquire() {
	b, err := bulkhead.New(8, 50*time.Millisecond)
	if err != nil {
		fmt.Println("new:", err)
		return
	}
	call := func(ctx context.Context) error {
		if err := b.Acquire(ctx); err != nil {
			return fmt.Errorf("payments: %w", err)
		}
		defer func() { _ = b.Release() }()
		// ... perform the HTTP request with ctx ...
		return nil
	}
	fmt.Println(call(context.Background()))
	fmt.Println("in flight after the call:", b.InFlight())

	// Output:
	// <nil>
	// in flight after the call: 0
}

// When the caller cancels while Acquire waits, the error matches
// context.Canceled, not ErrFull, and is not counted as a refusal: the
// caller gave up, the bulkhead did not refuse it.
func ExampleBulkhead_Acquire_contextEnded() {
	b, err := bulkhead.New(1, time.Minute)
	if err != nil {
		fmt.Println("new:", err)
		return
	}
	b.TryAcquire() // the only permit is now held

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller has already given up

	err = b.Acquire(ctx)
	fmt.Println(err)
	fmt.Println("full:", errors.Is(err, bulkhead.ErrFull))
	fmt.Println("canceled:", errors.Is(err, context.Canceled))
	fmt.Println("in flight:", b.InFlight(), "refused:", b.Refused())

	// Output:
	// bulkhead: wait canceled: context canceled
	// full: false
	// canceled: true
	// in flight: 1 refused: 0
}

// Releasing a permit that was never taken is reported, not a panic, and
// leaves the bulkhead as it was.
func ExampleBulkhead_Release() {
	b, err := bulkhead.New(1, 0)
	if err != nil {
		fmt.Println("new:", err)
		return
	}
	b.TryAcquire()
	fmt.Println(b.Release())
	err = b.Release() // one Release too many
	fmt.Println(err, errors.Is(err, bulkhead.ErrOverRelease))
	fmt.Println("in flight:", b.InFlight())

	// Output:
	// <nil>
	// bulkhead: release without a held permit true
	// in flight: 0
}
