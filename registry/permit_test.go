package registry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
)

var errOwnCause = errors.New("caller's own cause")

// TestPermitComesBackWhenTheCallsContextEnds checks that a held permit
// goes back to its bulkhead when the call's context ends, and not
// before: at its deadline, with context.DeadlineExceeded and the
// deadline's cause, or when the caller cancels, with the caller's error
// and cause; a context derived from the call's sees the same cause.
func TestPermitComesBackWhenTheCallsContextEnds(t *testing.T) {
	tests := []struct {
		name      string
		end       func(cancelParent context.CancelCauseFunc) // what ends the call; nil: its deadline
		wantErr   error
		wantCause error
	}{
		{"deadline", nil, context.DeadlineExceeded, capbudget.ErrCallTimeout},
		{"caller cancels", func(c context.CancelCauseFunc) { c(nil) }, context.Canceled, context.Canceled},
		{"caller cancels with a cause", func(c context.CancelCauseFunc) { c(errOwnCause) }, context.Canceled, errOwnCause},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bh, err := bulkhead.New(1, 0)
				if err != nil {
					t.Fatal(err)
				}
				parent, cancelParent := context.WithCancelCause(context.Background())
				defer cancelParent(nil)
				var p callPermit
				p.Start(&permitOwner{Bulkhead: bh, Closed: new(atomic.Bool)}, parent, time.Second, capbudget.ErrCallTimeout)
				defer p.Done()
				if !bh.TryAcquire() {
					t.Fatal("bulkhead full at start")
				}
				p.Watch()
				ctx := p.Ctx()
				child, cancelChild := context.WithCancel(ctx)
				defer cancelChild()
				if dl, ok := ctx.Deadline(); !ok || !dl.Equal(time.Now().Add(time.Second)) {
					t.Fatalf("Deadline() = %v, %v; want now+1s", dl, ok)
				}
				time.Sleep(999 * time.Millisecond)
				synctest.Wait()
				if ctx.Err() != nil || bh.InFlight() != 1 {
					t.Fatalf("ended before its deadline: Err %v, in flight %d", ctx.Err(), bh.InFlight())
				}
				if tt.end != nil {
					tt.end(cancelParent)
				} else {
					time.Sleep(time.Millisecond)
				}
				synctest.Wait()
				if err := ctx.Err(); err != tt.wantErr {
					t.Errorf("Err() = %v, want %v", err, tt.wantErr)
				}
				if c := context.Cause(ctx); c != tt.wantCause {
					t.Errorf("Cause = %v, want %v", c, tt.wantCause)
				}
				if child.Err() == nil || context.Cause(child) != tt.wantCause {
					t.Errorf("derived context: Err %v, Cause %v; want ended with cause %v", child.Err(), context.Cause(child), tt.wantCause)
				}
				if n := bh.InFlight(); n != 0 {
					t.Errorf("permits in flight after the context ended = %d, want 0", n)
				}
			})
		})
	}
}
