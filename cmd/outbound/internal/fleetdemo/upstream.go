package fleetdemo

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/cmd/outbound/internal/loopback"
)

// stormLength is the flaky fake's rhythm: healthy, then 503s, in turns
// of this length.
const stormLength = 4 * time.Second

// upstream is the flaky payments fake every pod calls.
type upstream struct {
	start time.Time
	hits  atomic.Int64 // requests it received
	srv   *loopback.Server
	url   string // its base URL, without the trailing slash
}

// startUpstream starts the fake on a free loopback port.
func startUpstream() (*upstream, error) {
	u := &upstream{start: time.Now()}
	srv, err := loopback.Serve("127.0.0.1:0", u)
	if err != nil {
		return nil, err
	}
	u.srv, u.url = srv, strings.TrimSuffix(srv.URL, "/")
	return u, nil
}

func (u *upstream) stop() { u.srv.Stop() }

// failing reports whether the fake is in a storm now.
func (u *upstream) failing() bool { return time.Since(u.start)/stormLength%2 == 1 }

// ServeHTTP answers 503 in a storm and "paid" otherwise.
func (u *upstream) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	u.hits.Add(1)
	if u.failing() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "paid")
}
