package outboundtest

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// Flap is healthy and failing in turns, counted in requests: up requests
// answered 200 "ok", then down requests answered 503, then again, in
// arrival order. It is safe for concurrent use, and panics if up or down is
// negative or both are zero.
func Flap(up, down int) http.Handler {
	if up < 0 || down < 0 || up+down == 0 {
		panic(fmt.Sprintf("outboundtest.Flap(%d, %d): want up, down >= 0 and not both 0", up, down))
	}
	var seen atomic.Int64
	period := int64(up + down)
	return flapping(func() bool { return (seen.Add(1)-1)%period < int64(up) })
}

// FlapClock is healthy and failing in turns, on the clock now: healthy
// for up from the moment FlapClock is called, then failing (503) for down,
// then again. The test moves the clock; no timer runs, so a test decides
// exactly which phase each request meets. now must be safe for concurrent
// use; FlapClock panics if up or down is negative or both are zero.
func FlapClock(now func() time.Time, up, down time.Duration) http.Handler {
	if up < 0 || down < 0 || up+down == 0 {
		panic(fmt.Sprintf("outboundtest.FlapClock(%v, %v): want up, down >= 0 and not both 0", up, down))
	}
	start := now()
	return flapping(func() bool {
		phase := now().Sub(start) % (up + down)
		if phase < 0 { // the clock went back
			phase += up + down
		}
		return phase < up
	})
}

func flapping(healthy func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if healthy() {
			Healthy().ServeHTTP(w, r)
			return
		}
		Reply{Status: http.StatusServiceUnavailable, Body: "flap"}.ServeHTTP(w, r)
	})
}
