package temporalclient

import (
	"context"
	"log/slog"
	"strings"
)

// quietCancellations keeps the SDK from reporting an ordinary
// cancellation as a failure: when a node attempt acknowledges a run's
// cancellation, the SDK logs "Activity error." at ERROR with "context
// canceled" and its last heartbeat "RecordActivityHeartbeat with error" at
// WARN. weft logs the attempt once, at INFO ("node attempt finished",
// outcome cancelled); those two lines go to DEBUG. Every other record
// passes unchanged.
type quietCancellations struct{ slog.Handler }

func (h quietCancellations) Handle(ctx context.Context, r slog.Record) error {
	if r.Level > slog.LevelDebug && cancellationNoise(r) {
		r.Level = slog.LevelDebug
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietCancellations) WithAttrs(as []slog.Attr) slog.Handler {
	return quietCancellations{h.Handler.WithAttrs(as)}
}

func (h quietCancellations) WithGroup(name string) slog.Handler {
	return quietCancellations{h.Handler.WithGroup(name)}
}

// cancellationNoise reports an SDK record about an activity whose context
// was cancelled (not timed out, not failed).
func cancellationNoise(r slog.Record) bool {
	if r.Message != "Activity error." && !strings.HasPrefix(r.Message, "RecordActivityHeartbeat with error") {
		return false
	}
	canceled := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "Error" {
			msg := a.Value.String()
			canceled = msg == "context canceled" || msg == "canceled"
			return false
		}
		return true
	})
	return canceled
}
