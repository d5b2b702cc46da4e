package registry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/outbound-go/outbound/bulkhead"
	"github.com/outbound-go/outbound/capbudget"
	"github.com/outbound-go/outbound/internal/breaker"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// Every error reads as one sentence, saying the system, the stage and the
// cause once each, and still matches its sentinel.
func TestErrorTextSaysSystemStageAndCauseOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *Error
		want string
		is   error
	}{
		{&Error{System: "inv", Op: observe.OpBulkhead, Err: bulkhead.ErrFull}, "outbound inv: bulkhead full", bulkhead.ErrFull},
		{&Error{System: "inv", Op: observe.OpBreaker, Err: breaker.Open}, "outbound inv: breaker open", ErrCircuitOpen},
		{&Error{System: "inv", Op: observe.OpBreaker, Err: breaker.ProbesBusy}, "outbound inv: breaker open: half-open, every probe taken", gobreaker.ErrTooManyRequests},
		{&Error{System: "inv", Op: observe.OpBudget, Err: capbudget.ErrExhausted}, "outbound inv: time budget exhausted", capbudget.ErrExhausted},
		{&Error{System: "inv", Op: observe.OpClosed, Err: ErrClosed}, "outbound inv: registry closed", ErrClosed},
		{&Error{System: "inv", Op: observe.OpCallTimeout, Method: "GET", URL: "http://h/x", Err: capbudget.ErrCallTimeout},
			`outbound inv: GET "http://h/x": call timeout`, context.DeadlineExceeded},
		{&Error{System: "inv", Op: observe.OpCallTimeout, Method: "GET", URL: "http://h/x", Attempts: 3, StatusCode: 503,
			Err: joinCauses(errors.New("status 503"), capbudget.ErrCallTimeout)},
			`outbound inv: GET "http://h/x": call timeout after 3 attempts (last status 503): status 503; call timeout`, capbudget.ErrCallTimeout},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%v does not match %v", tc.err, tc.is)
		}
	}

	// On real sockets: a full bulkhead, and a transport error through
	// HTTPClient, whose *url.Error names the URL (the *Error does not
	// again).
	gate := outboundtest.NewHang(outboundtest.Reply{Body: "ok"})
	srv := outboundtest.NewUpstream(t, gate)
	c := tbrClient(t, srv.URL, tbrFast("MAX_CONCURRENT", "1", "RETRIES", "0"))
	held := holdPermit(t, c, gate)
	_, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), c, "/x")
	if err == nil || err.Error() != "outbound inv: bulkhead full" || !errors.Is(err, bulkhead.ErrFull) {
		t.Errorf("full bulkhead: got %v, want \"outbound inv: bulkhead full\" matching bulkhead.ErrFull", err)
	}
	if _, ok := err.(*Error); !ok {
		t.Errorf("Do returned %T, want *Error", err)
	}
	gate.Release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	dead := testutil.RefusedAddr(t)
	c2 := tbrClient(t, "http://"+dead, tbrFast("RETRIES", "0"))
	req, _ := http.NewRequestWithContext(tbrCtx(t, 5*time.Second), http.MethodGet, "/y", nil)
	_, err = c2.HTTPClient().Do(req)
	if err == nil {
		t.Fatal("refused address answered")
	}
	t.Logf("%v", err)
	if n := strings.Count(err.Error(), "/y"); n != 1 {
		t.Errorf("%q names the URL %d times, want once", err, n)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != observe.OpConnect {
		t.Errorf("%v: want an *Error with Op connect inside", err)
	}
}

// Neither Do's errors nor HTTPClient().Do's carry a secret, whether from
// BASE_URL or from a redirect's Location.
func TestErrorsHideSecretsOfBaseURLAndLocation(t *testing.T) {
	t.Parallel()
	srv := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/x" {
			http.Redirect(w, r, "/y?signature=SECRET2", http.StatusFound)
			return
		}
		outboundtest.Reset().ServeHTTP(w, r)
	}))
	base := strings.Replace(srv.URL, "http://", "http://alice:pw@", 1) + "/?api_key=SECRET1"
	c := tbrClient(t, base, tbrFast("RETRIES", "0"))
	for _, tc := range []struct {
		name string
		do   func(*http.Request) (*http.Response, error)
	}{{"Do", c.Do}, {"HTTPClient", c.HTTPClient().Do}} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(tbrCtx(t, 10*time.Second), http.MethodGet, "/x", nil)
			resp, err := tc.do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("got a response, want the reset's error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%T %v does not wrap an *Error", err, err)
			}
			msg := err.Error()
			t.Logf("%s", msg)
			for _, secret := range []string{"SECRET1", "SECRET2", "alice", "pw@"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q shows %q", msg, secret)
				}
			}
		})
	}
}

// A token in BASE_URL's user name or query, or in the request's query,
// never reaches the text of Do's error (net/http's *url.Error would strip
// only the password).
func TestErrorsHideUserNameAndQueryTokens(t *testing.T) {
	t.Parallel()
	addr := testutil.RefusedAddr(t)
	r := loadRegistry(t, map[string]string{
		"OUTBOUND_SYSTEMS": "inv",
		"INV_BASE_URL":     "http://tok3n@" + addr + "/v1?api_key=SECRET1",
		"INV_RETRIES":      "0",
	})
	defer r.Close()
	c := r.MustClient("inv")
	res := resilGet(c, "/x?access_token=SECRET2", resilBound)
	if res.err == nil {
		t.Fatal("call to a refused port succeeded")
	}
	for _, secret := range []string{"tok3n", "SECRET1", "SECRET2"} {
		if strings.Contains(res.err.Error(), secret) {
			t.Errorf("error leaks %q: %v", secret, res.err)
		}
	}
}
