package permit

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errOwnCause = errors.New("caller's own cause")

// TestCallContextEndsAsCapWithsWould checks that the call's context
// (callCtx, one timer instead of CapWith's WithDeadlineCause plus a
// context.AfterFunc) ends as CapWith's would: at its deadline with context.DeadlineExceeded and its
// cause, for it and for a context derived from it; when the caller
// cancels, with the caller's error and cause; and not before.
func TestCallContextEndsAsCapWithsWould(t *testing.T) {
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
				parent, cancelParent := context.WithCancelCause(context.Background())
				defer cancelParent(nil)
				var cc callCtx
				cc.start(parent, time.Second, capbudget.ErrCallTimeout)
				defer cc.cancel(nil)
				timer := time.AfterFunc(time.Second, cc.expire)
				defer timer.Stop()
				child, cancelChild := context.WithCancel(&cc)
				defer cancelChild()
				if dl, ok := cc.Deadline(); !ok || !dl.Equal(time.Now().Add(time.Second)) {
					t.Fatalf("Deadline() = %v, %v; want now+1s", dl, ok)
				}
				time.Sleep(999 * time.Millisecond)
				synctest.Wait()
				if cc.Err() != nil || child.Err() != nil {
					t.Fatalf("ended before its deadline: %v, child %v", cc.Err(), child.Err())
				}
				if tt.end != nil {
					tt.end(cancelParent)
				} else {
					time.Sleep(time.Millisecond)
				}
				synctest.Wait()
				if err := cc.Err(); err != tt.wantErr {
					t.Errorf("Err() = %v, want %v", err, tt.wantErr)
				}
				if c := context.Cause(&cc); c != tt.wantCause {
					t.Errorf("Cause = %v, want %v", c, tt.wantCause)
				}
				if child.Err() == nil || context.Cause(child) != tt.wantCause {
					t.Errorf("derived context: Err %v, Cause %v; want ended with cause %v", child.Err(), context.Cause(child), tt.wantCause)
				}
				select {
				case <-cc.Done():
				default:
					t.Error("Done() not closed")
				}
			})
		})
	}
}
