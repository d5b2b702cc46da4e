package registry

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// countCalls counts the calls it is told of, and keeps nothing else: an
// observer that costs no allocation of its own.
type countCalls struct{ n atomic.Int64 }

func (o *countCalls) ObserveAttempt(observe.AttemptEvent)                               {}
func (o *countCalls) ObserveCall(observe.CallEvent)                                     { o.n.Add(1) }
func (o *countCalls) ObserveBreaker(string, observe.BreakerState, observe.BreakerState) {}

// TestFastRefusalAllocatesOnlyItsError checks that a call refused by an
// open breaker or a full bulkhead allocates one value, the caller's own
// *Error, with a relative or an absolute URL, with or without an
// observer, and that the refusal still reaches the observer and Status.
// AllocsPerRun cannot run in a parallel test.
func TestFastRefusalAllocatesOnlyItsError(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		// hold makes the next call be refused: it opens the breaker, or
		// takes the one permit (the response, closed at the end).
		hold    func(t *testing.T, c *Client, url string)
		want    error
		op      observe.Op
		refused func(observe.Status) uint64
	}{
		{
			name: "breaker open",
			env:  map[string]string{"RETRIES": "0", "BREAKER_MIN_REQUESTS": "1", "BREAKER_OPEN_TIMEOUT": "1h"},
			hold: func(t *testing.T, c *Client, url string) {
				if res := resilGet(c, url+"/status/500", resilBound); res.status != http.StatusInternalServerError {
					t.Fatalf("opening call: %v, want 500", res)
				}
			},
			want: ErrCircuitOpen, op: observe.OpBreaker,
			refused: func(st observe.Status) uint64 { return st.BreakerRefused },
		},
		{
			name: "bulkhead full",
			env:  map[string]string{"MAX_CONCURRENT": "1"},
			hold: func(t *testing.T, c *Client, url string) {
				resp, err := c.Do(newGet(t, url+"/status/200"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _ = io.Copy(io.Discard, resp.Body); _ = resp.Body.Close() })
			},
			want: bulkhead.ErrFull, op: observe.OpBulkhead,
			refused: func(st observe.Status) uint64 { return st.BulkheadRefused },
		},
	} {
		for _, observed := range []bool{false, true} {
			name := tc.name
			if observed {
				name += "/observed"
			}
			t.Run(name, func(t *testing.T) {
				srv := outboundtest.NewUpstream(t, resilStatusHandler())
				ob := new(countCalls)
				var opts []Option
				if observed {
					opts = append(opts, WithObserver(ob))
				}
				c := tbrClient(t, srv.URL, tc.env, opts...)
				tc.hold(t, c, srv.URL)
				sent, before, seen := srv.Requests(), tc.refused(c.Status()), ob.n.Load()
				const runs = 100
				for _, url := range []string{"/x", srv.URL + "/x"} {
					req := newGet(t, url)
					_, err := c.Do(req)
					tbrError(t, err, tc.op)
					if !errors.Is(err, tc.want) {
						t.Fatalf("%s: error %v does not match %v", url, err, tc.want)
					}
					if n := testing.AllocsPerRun(runs, func() { _, _ = c.Do(req) }); n > 1 {
						t.Errorf("%s: a refused call allocates %v times, want at most 1 (its *Error)", url, n)
					}
				}
				// Each URL: one call above, and AllocsPerRun's warm-up
				// and runs.
				const calls = 2 * (1 + 1 + runs)
				if got := tc.refused(c.Status()) - before; got != calls {
					t.Errorf("Status counts %d refusals, want %d", got, calls)
				}
				if observed {
					if got := ob.n.Load() - seen; got != calls {
						t.Errorf("the observer heard of %d calls, want %d", got, calls)
					}
				}
				if n := srv.Requests(); n != sent {
					t.Errorf("%d requests reached the server during the refusals, want 0", n-sent)
				}
			})
		}
	}
}

func newGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
