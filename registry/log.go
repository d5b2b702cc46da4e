// The log observer (registry.WithLogger) writes what happens to a
// registry's calls to a log/slog.Logger: one record per attempt, one per
// call refused before any attempt, sampled, and one per breaker change
// and large move of an adaptive limit. Attribute names follow
// OpenTelemetry's semantic conventions where one exists
// (http.request.method, server.address, url.path, ...), outbound's own
// under "outbound.".

package registry

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbound-go/outbound/observe"
)

// The messages of the records.
const (
	logMsgAttempt    = "outbound attempt"
	logMsgRefused    = "outbound call refused"
	logMsgSuppressed = "outbound calls refused"
	logMsgBreaker    = "outbound breaker state changed"
	logMsgLimit      = "outbound concurrency limit changed"
	logMsgPaused     = "outbound system paused by the upstream"
	logMsgForced     = "outbound breaker forced by an operator"
)

// logSampleEvery is the least time between two records of the refusals of
// one system for one reason: the first refusal of a burst is logged at
// once, the next ones are counted, and the count rides on the next record
// (a refusal a second or more later, the system's next change of breaker
// state, or its next call that is not refused).
const logSampleEvery = time.Second

// Observer is an observe.Observer (and observe.LimitObserver) that logs.
// Records never carry a URL: attempts log the host and the path (the
// route given with observe.WithRoute, else the raw path, with no
// userinfo and no query), and the errors logged are the registry's own,
// whose URLs are redacted. It is safe for concurrent use; at a disabled
// level an event costs one Enabled call and no allocation.
type logObserver struct {
	l *slog.Logger

	mu      sync.Mutex
	bursts  map[burstKey]*burst
	pending atomic.Int64 // bursts with refusals not logged yet
}

type burstKey struct {
	system  string
	outcome observe.Outcome
}

// burst is the sampling state of one system's refusals of one kind.
type burst struct {
	last       time.Time // of the last record
	suppressed int64     // refusals since, not logged
}

// New returns an observer that logs to l.
func newLogObserver(l *slog.Logger) *logObserver {
	return &logObserver{l: l, bursts: map[burstKey]*burst{}}
}

// ObserveAttempt logs successes at Debug and failed or refused attempts
// at Info.
func (o *logObserver) ObserveAttempt(e observe.AttemptEvent) {
	level := slog.LevelDebug
	if e.Outcome != observe.OutcomeOK {
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !o.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs, slog.String("outbound.system", e.System), slog.String("http.request.method", e.Method))
	attrs = appendServer(attrs, e.Host)
	if e.RouteName != "" {
		attrs = append(attrs, slog.String("outbound.route", e.RouteName))
	}
	if e.Route != "" {
		attrs = append(attrs, slog.String("url.template", e.Route))
	} else {
		attrs = append(attrs, slog.String("url.path", e.Path))
	}
	if e.Attempt > 1 {
		attrs = append(attrs, slog.Int("http.request.resend_count", e.Attempt-1))
	}
	if e.Status != 0 {
		attrs = append(attrs, slog.Int("http.response.status_code", e.Status))
	}
	attrs = appendErr(attrs, e.Op, e.Err)
	attrs = append(attrs, slog.String("outbound.outcome", e.Outcome.String()),
		slog.Float64("outbound.duration_ms", float64(e.Duration.Microseconds())/1000))
	if e.Hedge > 0 || e.Won || e.Outcome == observe.OutcomeHedgeLost {
		attrs = append(attrs, slog.Int("outbound.hedge", e.Hedge), slog.Bool("outbound.won", e.Won))
	}
	if e.Injected {
		attrs = append(attrs, slog.Bool("outbound.injected", true))
	}
	o.l.LogAttrs(ctx, level, logMsgAttempt, attrs...)
}

// appendServer adds server.address and, when the host names one,
// server.port.
func appendServer(attrs []slog.Attr, host string) []slog.Attr {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		return append(attrs, slog.String("server.address", host))
	}
	attrs = append(attrs, slog.String("server.address", h))
	if n, err := strconv.Atoi(p); err == nil {
		attrs = append(attrs, slog.Int("server.port", n))
	}
	return attrs
}

// appendErr adds error.type (the op: low cardinality) and
// exception.message, when there was an error.
func appendErr(attrs []slog.Attr, op observe.Op, err error) []slog.Attr {
	if op != 0 {
		attrs = append(attrs, slog.String("error.type", op.String()))
	}
	if err != nil {
		attrs = append(attrs, slog.String("exception.message", err.Error()))
	}
	return attrs
}

// ObserveCall logs, at Info and sampled, the calls that ended before any
// attempt was sent: those have no attempt record of their own. Other
// calls are described by their attempts; they end a burst of refusals of
// their system.
func (o *logObserver) ObserveCall(e observe.CallEvent) {
	if e.Attempts > 0 || e.Outcome == observe.OutcomeOK {
		if o.pending.Load() > 0 {
			o.flush(e.System)
		}
		return
	}
	ctx := context.Background()
	if !o.l.Enabled(ctx, slog.LevelInfo) {
		return
	}
	now := time.Now()
	o.mu.Lock()
	k := burstKey{e.System, e.Outcome}
	b := o.bursts[k]
	if b == nil {
		b = &burst{}
		o.bursts[k] = b
	}
	if !b.last.IsZero() && now.Sub(b.last) < logSampleEvery {
		if b.suppressed == 0 {
			o.pending.Add(1)
		}
		b.suppressed++
		o.mu.Unlock()
		return
	}
	n := b.suppressed
	if n > 0 {
		o.pending.Add(-1)
	}
	b.last, b.suppressed = now, 0
	o.mu.Unlock()

	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("outbound.system", e.System), slog.String("http.request.method", e.Method),
		slog.String("outbound.outcome", e.Outcome.String()))
	if e.RouteName != "" {
		attrs = append(attrs, slog.String("outbound.route", e.RouteName))
	}
	attrs = appendErr(attrs, e.Op, e.Err)
	if n > 0 {
		attrs = append(attrs, slog.Int64("outbound.suppressed", n))
	}
	o.l.LogAttrs(ctx, slog.LevelInfo, logMsgRefused, attrs...)
}

// flush logs the refusals of system counted but not logged, one record
// per kind, and ends their bursts.
func (o *logObserver) flush(system string) {
	type count struct {
		out observe.Outcome
		n   int64
	}
	var counts []count
	o.mu.Lock()
	for k, b := range o.bursts {
		if k.system == system && b.suppressed > 0 {
			counts = append(counts, count{k.outcome, b.suppressed})
			b.suppressed, b.last = 0, time.Time{}
			o.pending.Add(-1)
		}
	}
	o.mu.Unlock()
	for _, c := range counts {
		o.l.LogAttrs(context.Background(), slog.LevelInfo, logMsgSuppressed, slog.String("outbound.system", system),
			slog.String("outbound.outcome", c.out.String()), slog.Int64("outbound.suppressed", c.n))
	}
}

// ObserveBreaker logs every transition at Warn, after the refusals of
// the system still counted. It runs under the breaker's lock: it only
// formats and hands the records to the handler.
func (o *logObserver) ObserveBreaker(system string, from, to observe.BreakerState) {
	if o.pending.Load() > 0 {
		o.flush(system)
	}
	ctx := context.Background()
	if !o.l.Enabled(ctx, slog.LevelWarn) {
		return
	}
	o.l.LogAttrs(ctx, slog.LevelWarn, logMsgBreaker, slog.String("outbound.system", system),
		slog.String("outbound.breaker.from", string(from)), slog.String("outbound.breaker.to", string(to)))
}

// ObserveLimit logs a large move of an adaptive limit at Info. It runs
// under the bulkhead's lock: it only formats and hands the record to the
// handler.
func (o *logObserver) ObserveLimit(e observe.LimitEvent) {
	ctx := context.Background()
	if !o.l.Enabled(ctx, slog.LevelInfo) {
		return
	}
	o.l.LogAttrs(ctx, slog.LevelInfo, logMsgLimit, slog.String("outbound.system", e.System),
		slog.Int64("outbound.limit.from", e.From), slog.Int64("outbound.limit.to", e.To),
		slog.Int64("outbound.limit.ceiling", e.Ceiling))
}

// ObservePause logs a pause the upstream asked for, at Warn; without the
// status when another pod's upstream asked (status 0).
func (o *logObserver) ObservePause(system string, until time.Time, status int) {
	ctx := context.Background()
	if !o.l.Enabled(ctx, slog.LevelWarn) {
		return
	}
	attrs := []slog.Attr{slog.String("outbound.system", system), slog.Time("outbound.paused_until", until)}
	if status != 0 {
		attrs = append(attrs, slog.Int("http.response.status_code", status))
	}
	o.l.LogAttrs(ctx, slog.LevelWarn, logMsgPaused, attrs...)
}

// ObserveForce logs an operator's override of a breaker, or its release,
// at Warn.
func (o *logObserver) ObserveForce(system string, state observe.BreakerState, until time.Time) {
	ctx := context.Background()
	if !o.l.Enabled(ctx, slog.LevelWarn) {
		return
	}
	if state == "" {
		o.l.LogAttrs(ctx, slog.LevelWarn, logMsgForced, slog.String("outbound.system", system),
			slog.String("outbound.breaker.forced", "released"))
		return
	}
	o.l.LogAttrs(ctx, slog.LevelWarn, logMsgForced, slog.String("outbound.system", system),
		slog.String("outbound.breaker.forced", string(state)), slog.Time("outbound.forced_until", until))
}
