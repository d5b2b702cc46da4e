package registry

import (
	"context"
	"log/slog"
)

// logObserver writes one record per attempt and per breaker transition.
type logObserver struct{ l *slog.Logger }

func newLogObserver(l *slog.Logger) *logObserver { return &logObserver{l: l} }

func (o *logObserver) ObserveAttempt(e AttemptEvent) {
	level := slog.LevelDebug
	if e.Outcome != OutcomeOK {
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !o.l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("system", e.System), slog.String("method", e.Method),
		slog.String("host", e.Host), slog.String("path", e.Path),
		slog.Int("attempt", e.Attempt), slog.Int("status", e.Status),
		slog.Float64("duration_ms", float64(e.Duration.Microseconds())/1000),
		slog.String("outcome", e.Outcome.String()),
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	o.l.LogAttrs(ctx, level, "outbound attempt", attrs...)
}

func (o *logObserver) ObserveCall(CallEvent) {}

func (o *logObserver) ObserveBreaker(system string, from, to BreakerState) {
	o.l.LogAttrs(context.Background(), slog.LevelWarn, "outbound breaker state changed",
		slog.String("system", system), slog.String("from", string(from)), slog.String("to", string(to)))
}
