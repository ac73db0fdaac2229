package workflows

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Error types for failures that are not ApplicationErrors.
const (
	errTypeTimeout     = "TIMEOUT"
	errTypeCancelled   = "CANCELLED"
	errTypePanic       = "PANIC"
	errTypeUnknown     = "ERROR"
	errTypeUnknownPort = "UNKNOWN_PORT"
)

// maxRetryDelay keeps a misconfigured backoff from overflowing a Duration.
const maxRetryDelay = 24 * time.Hour

// isPermanent: these error types are non-retryable whatever the activity's
// flag says, because another attempt cannot change them (SPEC §5).
func isPermanent(typ string) bool {
	switch typ {
	case execution.ErrMappingUnresolved, execution.ErrPermissionDenied, execution.ErrPayloadTooLarge,
		execution.ErrInvalidOutput, execution.ErrSchemaViolation, execution.ErrNodeNotFound,
		execution.ErrPlanNotFound, execution.ErrExpressionFailed, execution.ErrIdempotencyConflict,
		errTypeUnknownPort:
		return true
	}
	return false
}

// failure is a classified attempt error.
type failure struct {
	typ, message string
	retryable    bool
	durationMs   int64 // simulated duration of the failed attempt, if reported
}

// classify reads an attempt's error: ApplicationErrors carry their type and
// retryability; timeouts and panics are retryable; anything else is too,
// since only an explicit marker makes an error permanent.
func classify(err error) failure {
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	var canceled *temporal.CanceledError
	var panicked *temporal.PanicError
	switch {
	case errors.As(err, &app):
		f := failure{typ: app.Type(), message: app.Message(), retryable: !app.NonRetryable() && !isPermanent(app.Type())}
		if f.typ == "" {
			f.typ = errTypeUnknown
		}
		var d execution.FailureDetails
		if app.HasDetails() && app.Details(&d) == nil {
			f.durationMs = d.DurationMs
		}
		return f
	case errors.As(err, &timeout):
		return failure{typ: errTypeTimeout, message: fmt.Sprintf("%s timeout", timeout.TimeoutType()), retryable: true}
	case errors.As(err, &canceled):
		return failure{typ: errTypeCancelled, message: "attempt cancelled"}
	case errors.As(err, &panicked):
		return failure{typ: errTypePanic, message: panicked.Error(), retryable: true}
	default:
		return failure{typ: errTypeUnknown, message: err.Error(), retryable: true}
	}
}

func nonRetryable(typ, msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, typ, nil)
}

// attemptFailed records a failed attempt and either schedules the next one
// or fails the node, which fails the run.
func (i *interpreter) attemptFailed(n *node, err error) {
	f := classify(err)
	if code := i.infraFault(n, err); code != "" {
		// Not the node's failure: the same attempt goes out again, unless
		// the run's durability limits are used up (durability.go).
		exhausted := i.redispatchLater(n, code, f)
		if exhausted == nil {
			return
		}
		f = *exhausted
	}
	if i.simulation {
		i.virtualMs += max(f.durationMs, 0)
	}
	attempt := n.state.Attempt
	d := execution.EventData{Attempt: attempt, Retryable: &f.retryable}
	errorData(&d, f)
	i.record(execution.EventNodeAttemptFailed, n, d)

	if f.retryable && attempt < maxAttempts(n.plan.Retry) {
		delay := retryDelay(n.plan.Retry, attempt)
		delayMs := delay.Milliseconds()
		i.record(execution.EventNodeRetryScheduled, n, execution.EventData{DelayMs: &delayMs, NextAttempt: attempt + 1})
		n.state.Status = execution.NodeWaiting
		if i.simulation {
			// Simulation records the delay and moves the virtual clock; nothing sleeps.
			i.virtualMs += delayMs
			n.due = true
			return
		}
		if delay <= 0 {
			n.due = true
			return
		}
		at := i.now().Add(delay)
		n.state.RetryAt, n.backoff = &at, delay
		return // schedule arms the timer after the flush
	}

	n.state.Status, n.state.Reason, n.state.Error = execution.NodeFailed, f.typ, f.message
	fd := execution.EventData{Attempts: attempt}
	errorData(&fd, f)
	i.record(execution.EventNodeFailed, n, fd)
	i.fail(&execution.RunError{
		Code:    execution.RunErrNodeFailed,
		NodeID:  n.plan.ID,
		Message: fmt.Sprintf("node %s failed after %d attempt(s): %s", n.plan.ID, attempt, fd.Error.Message),
	})
}

// armRetryTimer waits out a live backoff on a cancellable timer: exactly
// the recorded delay (the flush in between does not shorten it).
func (i *interpreter) armRetryTimer(n *node) {
	ctx, cancel := workflow.WithCancel(i.work)
	n.timer = workflow.NewTimerWithOptions(ctx, n.backoff, workflow.TimerOptions{
		Summary: fmt.Sprintf("%s · retry attempt %d", n.plan.ID, n.state.Attempt+1),
	})
	n.timerCancel = cancel
}

func maxAttempts(r graph.Retry) int { return max(r.MaxAttempts, 1) }

// retryDelay after a failed attempt: InitialIntervalMs × Backoff^(attempt-1),
// capped at MaxIntervalMs, no jitter (the delay is recorded, so it must be
// exactly what the interpreter waits).
func retryDelay(r graph.Retry, attempt int) time.Duration {
	backoff := math.Max(r.Backoff, 1)
	ms := float64(max(r.InitialIntervalMs, 0)) * math.Pow(backoff, float64(attempt-1))
	if r.MaxIntervalMs > 0 {
		ms = math.Min(ms, float64(r.MaxIntervalMs))
	}
	ms = math.Min(ms, float64(maxRetryDelay.Milliseconds()))
	return time.Duration(ms) * time.Millisecond
}
