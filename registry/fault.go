package registry

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// faultHeader is the header of a response fault injection made up
// instead of sending the attempt (an abort): its value is "abort".
const faultHeader = "X-Outbound-Fault"

// faultStage injects the system's faults into its attempts, for drills
// (OUTBOUND_FAULTS=on and FAULT_*): it aborts a fraction
// with a made-up status and delays a fraction before sending them, so
// that every outer stage sees them as it would see a real failing or
// slow upstream. It is in the chain only during a drill.
type faultStage struct {
	f    *faultInjector
	next attemptStage
}

func (s *faultStage) send(a *attempt) {
	out, resp, op, err, done := s.f.inject(a.req)
	if done {
		// As a RoundTripper would: the attempt's body is closed, sent or
		// not.
		closeBody(a.req)
		a.resp, a.op, a.err = resp, op, err
		return
	}
	delayed := out != a.req
	a.req = out
	s.next.send(a)
	if delayed && a.err != nil {
		a.err = markDelayed(a.err)
	}
}

// faultInjector is the fault injection of one system's attempts:
// FAULT_ABORT_RATIO of attempts are answered with FAULT_ABORT_STATUS
// without reaching the upstream, FAULT_DELAY_RATIO of attempts wait
// FAULT_DELAY before they are sent. A system that injects nothing has no
// faults (nil), so the send stage pays one nil check.
//
// The draws come from a counter hashed with a seed (splitmix64): lock
// free, safe for concurrent use, and the same sequence for the same seed
// and order of attempts (WithFaultSeed).
type faultInjector struct {
	abortBelow, delayBelow uint64 // a 53-bit draw below this injects; 0 never
	status                 int
	delay                  time.Duration
	read                   time.Duration // READ_TIMEOUT: a delay that reaches it is a read timeout
	desc                   string        // config.Client.Faults()
	abortVar               string        // PAYMENTS_FAULT_ABORT_RATIO, for the abort's body

	seed    uint64
	n       atomic.Uint64 // draws taken
	aborted atomic.Uint64 // attempts answered by an injected abort
	delayed atomic.Uint64 // attempts held by an injected delay
}

// newFaultInjector returns l's fault injection, or nil when it injects nothing or
// OUTBOUND_FAULTS did not allow it (config.Load refuses that anyway).
// seed fixes the sequence of draws (tests); nil draws a random seed.
func newFaultInjector(l config.Loaded, seed *uint64) *faultInjector {
	c := l.Client
	desc := c.Faults()
	if desc == "" || !l.FaultsAllowed() {
		return nil
	}
	f := &faultInjector{abortBelow: below(c.FaultAbortRatio), status: c.FaultAbortStatus, read: c.ReadTimeout,
		desc: desc, abortVar: l.Prefix + "_FAULT_ABORT_RATIO", seed: rand.Uint64()}
	if c.FaultDelay > 0 {
		f.delay, f.delayBelow = c.FaultDelay, below(c.FaultDelayRatio)
	}
	if seed != nil {
		f.seed = *seed
	}
	return f
}

// below turns a ratio into the bound of a 53-bit draw: 1 is 2^53, always.
func below(ratio float64) uint64 { return uint64(ratio * (1 << 53)) }

// draw returns two independent 53-bit uniform draws for one attempt.
func (f *faultInjector) draw() (a, b uint64) {
	x := f.seed + f.n.Add(1)*0x9e3779b97f4a7c15
	return mix(x) >> 11, mix(x^0x5851f42d4c957f2d) >> 11
}

// mix is splitmix64's finalizer.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// faultKey marks, on the context of a request sent after an injected
// delay, that its attempt was injected (the response carries it back).
type faultKey struct{}

// inject applies the faults to one attempt before it is sent: done says
// the attempt ends here, with resp (an abort) or err (a delay that
// reached READ_TIMEOUT or the deadline), op naming the phase. Otherwise
// the attempt goes on with out, which is req, or a copy marked as
// delayed.
func (f *faultInjector) inject(req *http.Request) (out *http.Request, resp *http.Response, op observe.Op, err error, done bool) {
	a, d := f.draw()
	out = req
	if d < f.delayBelow {
		f.delayed.Add(1)
		if op, err := f.wait(req.Context()); err != nil {
			return nil, nil, op, err, true
		}
		out = req.WithContext(context.WithValue(req.Context(), faultKey{}, true))
	}
	if a < f.abortBelow {
		f.aborted.Add(1)
		return nil, f.abort(out), 0, nil, true
	}
	return out, nil, 0, nil, false
}

// wait holds an attempt for the injected delay. The delay stands for a
// slow upstream, so it counts against READ_TIMEOUT as a header wait
// would: a delay that reaches READ_TIMEOUT ends the attempt there as a
// read timeout. The context's end (CALL_TIMEOUT, the caller's budget, a
// cancellation) cuts it too.
func (f *faultInjector) wait(ctx context.Context) (observe.Op, error) {
	d := min(f.delay, f.read)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return classify(ctx, ctx.Err()), &injectedError{
			msg:   "injected delay of " + f.delay.String() + " cut: " + ctx.Err().Error(),
			cause: ctx.Err(),
		}
	case <-t.C:
	}
	if f.delay >= f.read {
		return observe.OpReadTimeout, &injectedError{msg: "timeout awaiting response headers: injected delay of " +
			f.delay.String() + " reached READ_TIMEOUT (" + f.read.String() + ")"}
	}
	return 0, nil
}

// abort makes up the response of an aborted attempt: FAULT_ABORT_STATUS,
// marked with faultHeader, and a body that says so.
func (f *faultInjector) abort(req *http.Request) *http.Response {
	msg := "outbound: injected abort (" + f.abortVar + ")\n"
	return &http.Response{
		Status:     strconv.Itoa(f.status) + " " + http.StatusText(f.status),
		StatusCode: f.status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type": {"text/plain; charset=utf-8"},
			faultHeader:    {"abort"},
		},
		Body:          faultBody{strings.NewReader(msg)},
		ContentLength: int64(len(msg)),
		Request:       req,
	}
}

// faultBody is the body of an injected abort; its type tells observers
// the response was made up.
type faultBody struct{ *strings.Reader }

func (faultBody) Close() error { return nil }

// injectedError is the error of an attempt a fault ended, or of an
// attempt sent after an injected delay. Its text is the cause's (so the
// phase is still named by it) and it matches [ErrInjected].
type injectedError struct {
	msg   string
	cause error // nil: none
}

func (e *injectedError) Error() string { return e.msg }
func (e *injectedError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrInjected}
	}
	return []error{ErrInjected, e.cause}
}

// isInjected reports whether fault injection touched the attempt that ended
// with resp or err: an abort, a delay, or a delayed attempt's real answer.
func isInjected(resp *http.Response, err error) bool {
	if resp != nil {
		if _, ok := resp.Body.(faultBody); ok {
			return true
		}
		return resp.Request != nil && resp.Request.Context().Value(faultKey{}) != nil
	}
	return errors.Is(err, ErrInjected)
}

// aborts and delays are the faults' counts; 0 without faults (nil).
func (f *faultInjector) aborts() uint64 {
	if f == nil {
		return 0
	}
	return f.aborted.Load()
}

func (f *faultInjector) delays() uint64 {
	if f == nil {
		return 0
	}
	return f.delayed.Load()
}

// markDelayed marks the error of an attempt sent after an injected delay.
func markDelayed(err error) error {
	return &injectedError{msg: err.Error() + " (after an injected delay)", cause: err}
}

// describe says what f does, in one line ("aborts 10% of attempts with
// 503"), or "" for nil.
func (f *faultInjector) describe() string {
	if f == nil {
		return ""
	}
	return f.desc
}
