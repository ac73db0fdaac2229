package activities

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
)

// NodeObserver is told how long each node attempt took and how it ended
// (metrics.Metrics implements it: weft_node_duration_seconds).
type NodeObserver interface {
	ObserveNode(kind, outcome string, d time.Duration)
}

// Node attempt outcomes, as observed and logged.
const (
	outcomeSucceeded = "succeeded"
	outcomeFailed    = "failed"
	outcomeCancelled = "cancelled"
)

// nodeRunner is RunNode and RunLocalNode.
type nodeRunner func(context.Context, execution.NodeInput) (execution.NodeResult, error)

// observed wraps a node activity: it times each attempt, reports it to obs
// (when set) and logs it with the run, node and attempt, so every node
// attempt leaves one JSON line that can be found by run id.
func observed(run nodeRunner, obs NodeObserver, log *slog.Logger) nodeRunner {
	return func(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
		start := time.Now()
		var seen *execution.NodeInput
		if in.Lean {
			// withRunConstants completes the input inside (before run
			// returns): log the attempt with the run's constants.
			completed := in
			seen = &completed
			ctx = context.WithValue(ctx, resolvedKey{}, seen)
		}
		res, err := run(ctx, in)
		d := time.Since(start)
		if seen != nil {
			in = *seen
		}
		outcome := nodeOutcome(ctx, err)
		if obs != nil {
			obs.ObserveNode(string(in.Kind), outcome, d)
		}
		level := slog.LevelInfo
		if err != nil && outcome != outcomeCancelled { // a cancellation is an operator's or the run's decision, not a fault
			level = slog.LevelWarn
		}
		// The attributes are built only for a line the logger writes: a
		// worker logging at warn level allocates nothing for its successes.
		if log.Enabled(context.Background(), level) {
			log.Log(context.Background(), level, "node attempt finished", attemptAttrs(in, res, err, outcome, d)...)
		}
		return res, err
	}
}

// attemptAttrs are the attributes of an attempt's log line.
func attemptAttrs(in execution.NodeInput, res execution.NodeResult, err error, outcome string, d time.Duration) []any {
	attrs := []any{"run", in.RunID, "tenant", in.TenantID, "workflowKey", in.WorkflowKey, "node", in.NodeID,
		"kind", string(in.Kind), "attempt", in.Attempt, "mode", string(in.Mode), "outcome", outcome,
		"durationMs", float64(d.Microseconds()) / 1000}
	if err == nil {
		return append(attrs, "port", res.Port)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		attrs = append(attrs, "errorType", appErr.Type())
	}
	return append(attrs, "err", err)
}

// nodeOutcome classifies an attempt: cancelled when Temporal cancelled or
// timed out the activity itself, failed for any other error.
func nodeOutcome(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return outcomeSucceeded
	case ctx.Err() != nil || temporal.IsCanceledError(err):
		return outcomeCancelled
	}
	return outcomeFailed
}

// appendRunner is AppendEvents.
type appendRunner func(context.Context, execution.AppendEventsInput) error

// loggedAppends wraps AppendEvents: a batch that changes the run's status
// (running, succeeded, failed, cancelled) logs it once it is stored, so a
// run's life shows in the logs by run id next to its node attempts.
func loggedAppends(appendEvents appendRunner, log *slog.Logger) appendRunner {
	return func(ctx context.Context, in execution.AppendEventsInput) error {
		err := appendEvents(ctx, in)
		if err == nil && in.Run != nil {
			attrs := []any{"run", in.RunID, "tenant", in.TenantID, "status", in.Run.Status}
			if in.Run.Error != nil {
				attrs = append(attrs, "errorCode", in.Run.Error.Code)
				if in.Run.Error.NodeID != "" {
					attrs = append(attrs, "errorNode", in.Run.Error.NodeID)
				}
			}
			log.Info("run status", attrs...)
		}
		return err
	}
}
