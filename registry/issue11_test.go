package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/outboundtest"
)

var errIssue11Own = errors.New("caller's own cause")

// TestIssue11CallContext: the call's context (callCtx, one timer instead
// of CapWith's WithDeadlineCause plus a context.AfterFunc) ends as
// CapWith's would: at its deadline with context.DeadlineExceeded and its
// cause, for it and for a context derived from it; when the caller
// cancels, with the caller's error and cause; and not before.
func TestIssue11CallContext(t *testing.T) {
	tests := []struct {
		name      string
		end       func(cancelParent context.CancelCauseFunc) // what ends the call; nil: its deadline
		wantErr   error
		wantCause error
	}{
		{"deadline", nil, context.DeadlineExceeded, capbudget.ErrCallTimeout},
		{"caller cancels", func(c context.CancelCauseFunc) { c(nil) }, context.Canceled, context.Canceled},
		{"caller cancels with a cause", func(c context.CancelCauseFunc) { c(errIssue11Own) }, context.Canceled, errIssue11Own},
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

// TestIssue11ForgottenBodyComesBackWhenCallerCancels: a body never
// closed gives its permit back when the caller's context ends, long
// before CALL_TIMEOUT, now that the permit watches the caller's context
// and the deadline apart (issue 11) instead of one context.AfterFunc on
// the call's. It fails (still in flight after 5s) without the watch on
// the caller's context.
func TestIssue11ForgottenBodyComesBackWhenCallerCancels(t *testing.T) {
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	c := mtlsRegistry(t, map[string]map[string]string{"forgot": {
		"BASE_URL": srv.URL, "CALL_TIMEOUT": "1m", "MAX_CONCURRENT": "1", "BULKHEAD_MAX_WAIT": "0",
	}}).MustClient("forgot")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // at the end only: forgotten until then
	if got := c.Status().InFlight; got != 1 {
		t.Fatalf("in flight with the body open = %d, want 1", got)
	}
	start := time.Now()
	cancel()
	for c.Status().InFlight != 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the permit is still held 5s after the caller cancelled (CALL_TIMEOUT 1m)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("permit back %v after the caller cancelled", time.Since(start).Round(time.Millisecond))
}
