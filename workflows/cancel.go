package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
)

// NodeState.Reason of a cancelled node, besides execution.SkipCancelled
// (acknowledged) and an error type.
const (
	reasonCancelUnacknowledged = "CANCEL_UNACKNOWLEDGED"
	reasonLateResult           = "LATE_RESULT"
)

// cancelRun: Temporal cancelled the workflow (API cancel or `temporal
// workflow cancel`). The run ends cancelled; finish does the cooperative part.
func (i *interpreter) cancelRun() {
	i.outcome = outcomeCancelled
	i.runErr = &execution.RunError{Code: execution.RunErrCancelled, Message: "run cancelled"}
	i.record(execution.EventRunCancelRequested, nil, execution.EventData{})
}

// finish ends the run once its outcome is decided: nodes that never ran are
// skipped, in-flight attempts are asked to cancel and given cancelGrace to
// settle, then the terminal event is appended with the run row's final
// state. The terminal event is always the run's last event.
func (i *interpreter) finish() (execution.Value, error) {
	reason := execution.SkipCancelled
	if i.outcome == outcomeSucceeded {
		reason = execution.SkipSettled
	}
	inFlight := false
	for _, n := range i.nodes {
		switch n.state.Status {
		case execution.NodePending:
			n.state.Status, n.state.Reason = execution.NodeSkipped, reason
			i.record(execution.EventNodeSkipped, n, execution.EventData{Reason: reason})
		case execution.NodeAwaitingApproval:
			i.cancelApproval(n) // approvals.go
		case execution.NodeWaiting:
			if n.timerCancel != nil {
				n.timerCancel()
			}
			n.timer, n.timerCancel, n.due = nil, nil, false
			n.state.Status, n.state.Reason, n.state.RetryAt = execution.NodeCancelled, execution.SkipCancelled, nil
			i.record(execution.EventNodeCancelAcknowledged, n, execution.EventData{Reason: execution.ReasonRetryWait})
		case execution.NodeRunning:
			if n.future != nil {
				n.cancel()
				n.cancelRequested = true
				inFlight = true
			} else if n.state.Redispatch {
				// Lost to an infrastructure fault and not yet sent out again:
				// dropping its re-dispatch is the whole cancellation.
				if n.timerCancel != nil {
					n.timerCancel()
				}
				n.timer, n.timerCancel, n.due = nil, nil, false
				n.state.Status, n.state.Reason, n.state.RetryAt, n.state.Redispatch = execution.NodeCancelled, execution.SkipCancelled, nil, false
				i.record(execution.EventNodeCancelAcknowledged, n, execution.EventData{Reason: execution.ReasonRedispatchWait})
			}
		}
	}
	if inFlight {
		if err := i.flush(); err != nil {
			return execution.Value{}, err
		}
		if err := i.drain(); err != nil {
			return execution.Value{}, err
		}
	}
	return i.terminate()
}

// drain waits up to cancelGrace for cancelled attempts to return, flushing
// what each workflow task learns.
func (i *interpreter) drain() error {
	ctx, stop := workflow.WithCancel(i.work)
	defer stop()
	deadline := workflow.NewTimerWithOptions(ctx, cancelGrace, workflow.TimerOptions{Summary: "cancel grace"})
	for i.activityInFlight() {
		sel := workflow.NewSelector(i.work)
		for _, n := range i.nodes {
			if n.future != nil {
				sel.AddFuture(n.future, func(workflow.Future) {})
			}
		}
		sel.AddFuture(deadline, func(workflow.Future) {})
		sel.Select(i.work)
		i.collect()
		if deadline.IsReady() {
			for _, n := range i.nodes {
				if n.future != nil {
					// The activity keeps running in Temporal; its result, if
					// any, arrives after the run closed and is dropped.
					n.future, n.cancel = nil, nil
					n.state.Status, n.state.Reason = execution.NodeCancelled, reasonCancelUnacknowledged
					i.record(execution.EventNodeCancelUnacked, n, execution.EventData{WaitedMs: cancelGrace.Milliseconds()})
				}
			}
		}
		if err := i.flush(); err != nil {
			return err
		}
	}
	return nil
}

// cancelSettled handles an attempt that returned after it was asked to cancel.
func (i *interpreter) cancelSettled(n *node, res execution.NodeResult, err error) {
	n.state.Status = execution.NodeCancelled
	var canceled *temporal.CanceledError
	var timedOut *temporal.TimeoutError
	switch {
	case err == nil:
		// Evidence only: the run is ending, so the value is never routed.
		n.state.Port, n.state.Reason = res.Port, reasonLateResult
		d := execution.EventData{Port: res.Port}
		valueData(&d, res.Value)
		i.record(execution.EventNodeLateResult, n, d)
	case errors.As(err, &canceled):
		n.state.Reason = execution.SkipCancelled
		i.record(execution.EventNodeCancelAcknowledged, n, execution.EventData{})
	case errors.As(err, &timedOut):
		// Temporal gave up on the attempt before it acknowledged: an attempt
		// that ignores its cancellation stops heartbeating once the SDK has
		// cancelled its context, so its heartbeat timeout (as long as
		// cancelGrace) races the grace deadline. Either way it never
		// acknowledged.
		f := classify(err)
		n.state.Reason, n.state.Error = reasonCancelUnacknowledged, f.message
		d := execution.EventData{}
		errorData(&d, f)
		i.record(execution.EventNodeCancelUnacked, n, d)
	default:
		f := classify(err)
		n.state.Reason, n.state.Error = f.typ, f.message
		d := execution.EventData{}
		errorData(&d, f)
		i.record(execution.EventNodeCancelAcknowledged, n, d)
	}
}

// terminate appends the terminal event with the run update and returns
// what Temporal should record.
func (i *interpreter) terminate() (execution.Value, error) {
	var err error
	switch i.outcome {
	case outcomeSucceeded:
		out := i.output
		i.events.setUpdate(&execution.RunUpdate{Status: execution.StatusSucceeded, Output: &out})
		d := execution.EventData{NodeID: i.settledBy}
		valueData(&d, out)
		i.record(execution.EventRunSucceeded, nil, d)
	case outcomeFailed:
		i.events.setUpdate(&execution.RunUpdate{Status: execution.StatusFailed, Error: i.runErr})
		i.record(execution.EventRunFailed, nil, execution.EventData{RunError: i.runErr})
		err = temporal.NewNonRetryableApplicationError(i.runErr.Message, i.runErr.Code, nil, *i.runErr)
	case outcomeCancelled:
		i.events.setUpdate(&execution.RunUpdate{Status: execution.StatusCancelled, Error: i.runErr})
		i.record(execution.EventRunCancelled, nil, execution.EventData{RunError: i.runErr})
		err = temporal.NewCanceledError()
	}
	if ferr := i.flush(); ferr != nil {
		return execution.Value{}, ferr
	}
	if err != nil {
		return execution.Value{}, err
	}
	return i.output, nil
}
