package registry

import (
	"context"
	"log/slog"

	"github.com/outbound-go/outbound/observe"
)

// The messages of the records [WithLogger] writes.
const (
	logMsgAttempt  = "outbound attempt"
	logMsgRejected = "outbound call rejected"
	logMsgBreaker  = "outbound breaker state changed"
	logMsgLimit    = "outbound concurrency limit changed"
)

// logObserver writes one record per attempt, one per call refused before
// any attempt (breaker open, bulkhead full, budget spent), and one per
// breaker transition. It is added by [WithLogger] only: without a logger
// a registry has no log observer at all, so logging costs nothing.
//
// Records never carry a URL: attempts log the host and the path (the
// route set with WithRoute, else the raw path; the event has no userinfo
// and no query), and the errors logged are the registry's own, whose URLs
// are redacted.
type logObserver struct{ l *slog.Logger }

func newLogObserver(l *slog.Logger) *logObserver { return &logObserver{l: l} }

// ObserveAttempt logs successes at Debug and failed or refused attempts
// at Info. The level is checked before any attribute is built, so a
// disabled level costs one Enabled call and no allocation.
func (o *logObserver) ObserveAttempt(e observe.AttemptEvent) {
	level := slog.LevelDebug
	if e.Outcome != observe.OutcomeOK {
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !o.l.Enabled(ctx, level) {
		return
	}
	durMS := float64(e.Duration.Microseconds()) / 1000
	if e.Hedge > 0 || e.Won || e.Outcome == observe.OutcomeHedgeLost {
		o.logHedged(ctx, level, e, durMS)
		return
	}
	if e.Injected {
		o.logInjected(ctx, level, e, durMS)
		return
	}
	if e.Err == nil {
		o.l.LogAttrs(ctx, level, logMsgAttempt,
			slog.String("system", e.System), slog.String("method", e.Method),
			slog.String("host", e.Host), slog.String("path", e.Path),
			slog.Int("attempt", e.Attempt), slog.Int("status", e.Status),
			slog.Float64("duration_ms", durMS), slog.String("outcome", e.Outcome.String()))
		return
	}
	o.l.LogAttrs(ctx, level, logMsgAttempt,
		slog.String("system", e.System), slog.String("method", e.Method),
		slog.String("host", e.Host), slog.String("path", e.Path),
		slog.Int("attempt", e.Attempt), slog.Int("status", e.Status),
		slog.Float64("duration_ms", durMS), slog.String("outcome", e.Outcome.String()),
		slog.String("error", e.Err.Error()))
}

// logHedged logs a copy of a hedged attempt: which copy it was (hedge 0
// is the first) and whether its answer went to the caller (won).
func (o *logObserver) logHedged(ctx context.Context, level slog.Level, e observe.AttemptEvent, durMS float64) {
	attrs := []slog.Attr{slog.String("system", e.System), slog.String("method", e.Method),
		slog.String("host", e.Host), slog.String("path", e.Path),
		slog.Int("attempt", e.Attempt), slog.Int("hedge", e.Hedge), slog.Bool("won", e.Won),
		slog.Int("status", e.Status), slog.Float64("duration_ms", durMS), slog.String("outcome", e.Outcome.String())}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	if e.Injected {
		attrs = append(attrs, slog.Bool("injected", true))
	}
	o.l.LogAttrs(ctx, level, logMsgAttempt, attrs...)
}

// logInjected logs an attempt fault injection aborted or delayed (a
// drill), with injected=true so that it is not read as the upstream's.
func (o *logObserver) logInjected(ctx context.Context, level slog.Level, e observe.AttemptEvent, durMS float64) {
	o.l.LogAttrs(ctx, level, logMsgAttempt,
		slog.String("system", e.System), slog.String("method", e.Method),
		slog.String("host", e.Host), slog.String("path", e.Path),
		slog.Int("attempt", e.Attempt), slog.Int("status", e.Status),
		slog.Float64("duration_ms", durMS), slog.String("outcome", e.Outcome.String()),
		slog.String("error", errString(e.Err)), slog.Bool("injected", true))
}

// ObserveCall logs, at Info, the calls that ended before any attempt was
// sent: those have no attempt record of their own. Other calls are
// described by their attempts.
func (o *logObserver) ObserveCall(e observe.CallEvent) {
	if e.Attempts > 0 || e.Outcome == observe.OutcomeOK {
		return
	}
	ctx := context.Background()
	if !o.l.Enabled(ctx, slog.LevelInfo) {
		return
	}
	o.l.LogAttrs(ctx, slog.LevelInfo, logMsgRejected,
		slog.String("system", e.System), slog.String("method", e.Method),
		slog.Int("attempt", 0), slog.String("outcome", e.Outcome.String()),
		slog.String("error", errString(e.Err)))
}

// ObserveBreaker logs every transition at Warn. It runs under the
// breaker's lock: it only formats and hands the record to the handler.
func (o *logObserver) ObserveBreaker(system string, from, to observe.BreakerState) {
	ctx := context.Background()
	if !o.l.Enabled(ctx, slog.LevelWarn) {
		return
	}
	o.l.LogAttrs(ctx, slog.LevelWarn, logMsgBreaker,
		slog.String("system", system), slog.String("from", string(from)), slog.String("to", string(to)))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ObserveLimit logs a large move of an adaptive limit at Info. It runs
// under the bulkhead's lock: it only formats and hands the record to the
// handler.
func (o *logObserver) ObserveLimit(e observe.LimitEvent) {
	ctx := context.Background()
	if !o.l.Enabled(ctx, slog.LevelInfo) {
		return
	}
	o.l.LogAttrs(ctx, slog.LevelInfo, logMsgLimit, slog.String("system", e.System),
		slog.Int64("from", e.From), slog.Int64("to", e.To), slog.Int64("ceiling", e.Ceiling))
}
