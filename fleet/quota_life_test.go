package fleet_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/outbound-go/outbound/fleet/redistest"
	"github.com/outbound-go/outbound/outboundtest"
)

// TestDeadPodsShareComesBackByItself: a pod that dies right after its
// grant (its entry, as it wrote it, with nobody to renew it) holds its
// share for one grant life at most (1.1s with fleet.Config's defaults);
// then the live pods have the whole limit again.
func TestDeadPodsShareComesBackByItself(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	pods := startPods(t, 2, srv, "dead", "local", up.URL, quotaEnv("100/s", nil))
	settle(t, pods, 100)
	f := newForeign(srv, "dead")
	life := 1100 * time.Millisecond
	died := time.Now()
	// Wants all of it, holds a third: as the pods would have granted it.
	f.do(t, "HSET", f.base+":quota", "deadpod", "100000000 33333333 33333333 "+strconv.FormatInt(ms(died.Add(life)), 10))
	held := func() bool { return sumShares(pods, func(float64) bool { return true }) <= 100-33 }
	waitFor(t, syncWait, "the pods see the dead pod, or its life ends", func() bool {
		return held() || !time.Now().Before(died.Add(life))
	})
	seen := held()
	waitFor(t, syncWait, "the live pods have the limit again", func() bool {
		return sumShares(pods, func(s float64) bool { return s >= 49.99 }) == 100
	})
	t.Logf("a dead pod's share came back %v after it died (grant life %v)", time.Since(died), life)
	if !seen {
		// The machine ran the pods' ticks so late that the dead pod's
		// entry had ended before either counted it: nothing was held to
		// judge, only its share's return.
		t.Logf("the pods counted the dead pod's entry only after its life had ended")
	} else if d := time.Since(died); d < life {
		t.Errorf("the share came back %v after the pod died, before its grant life (%v): it was not held", d, life)
	}
}

// TestClosedPodGivesItsShareBack: a pod whose fleet closes (a pod shut
// down cleanly) gives its share back at once: its entry leaves the
// quota's hash as Close returns, well before the share would have
// expired, and the other pod then has the whole limit.
func TestClosedPodGivesItsShareBack(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	pods := startPods(t, 2, srv, "bye", "local", up.URL, quotaEnv("100/s", nil))
	settle(t, pods, 100)
	quota := newForeign(srv, "bye").base + ":quota"
	fields := func() int {
		n, _ := strconv.Atoi(newForeign(srv, "bye").do(t, "HLEN", quota))
		return n
	}
	before := fields()
	pods[1].reg.Close()
	pods[1].fleet.Close()
	// What the closing pod did, judged at once: its entry is gone (an
	// expiry would have left it for a grant life).
	if n := fields(); n >= before {
		t.Errorf("the quota's hash holds %d fields once a pod has closed (%d before): the closed pod's share was not given back", n, before)
	}
	d := waitFor(t, syncWait, "the other pod has the whole limit", func() bool {
		return pods[0].c.Status().Rate.Share >= 99.99
	})
	t.Logf("a pod closed: the other had the whole limit %v later", d)
	if st := pods[1].c.Status().Rate; st.Synced || st.Share != 50 {
		t.Errorf("the closed pod's quota: %+v, want limit / pods last seen (50/s), not synced", st)
	}
}
