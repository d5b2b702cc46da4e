package force

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbound-go/outbound/observe"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type shared struct {
	s observe.BreakerState
	u time.Time
}

func (s shared) Forced() (observe.BreakerState, time.Time) { return s.s, s.u }

// TestOverrideEndsAtItsTime checks an own override, its end, its release,
// and that a shared one is read from the fleet instead.
func TestOverrideEndsAtItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var o Override
		if o.State() != "" || o.Status() != nil {
			t.Fatal("a zero Override holds an override")
		}
		o.Set(observe.BreakerOpen, time.Now().Add(time.Minute))
		if o.State() != observe.BreakerOpen || o.Status().Until != time.Now().Add(time.Minute) {
			t.Errorf("set: %q %+v", o.State(), o.Status())
		}
		time.Sleep(time.Minute)
		if o.State() != "" || o.Status() != nil {
			t.Errorf("after its time: %q %+v", o.State(), o.Status())
		}
		o.Set(observe.BreakerClosed, time.Now().Add(time.Hour))
		o.Set("", time.Time{})
		if o.State() != "" {
			t.Errorf("released: %q", o.State())
		}
		o.Share(shared{observe.BreakerClosed, time.Now().Add(time.Second)})
		if o.State() != observe.BreakerClosed {
			t.Errorf("shared: %q", o.State())
		}
	})
	var o Override
	if n := testing.AllocsPerRun(100, func() { _ = o.State() }); n != 0 {
		t.Errorf("State allocates %v times", n)
	}
}
