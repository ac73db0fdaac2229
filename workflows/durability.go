package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
)

// changeInfraRedispatch: infrastructure faults no longer spend a node's
// attempts (execution/durability.go). Attempts run with the run's lease as
// heartbeat timeout and a start-to-close timeout past the node's own
// deadline, which the activity enforces itself; a lost lease (a HEARTBEAT
// or START_TO_CLOSE timeout of an activity) and an activity's
// WORKER_DRAINED, STORE_UNAVAILABLE or PROVIDER_UNAVAILABLE re-dispatch the
// same attempt after a short backoff, recorded as node.attempt.lease_lost
// or node.attempt.infra_retry, until the run's Durability limits, past which
// the node fails with INFRA_UNAVAILABLE. Decided once per execution.
const changeInfraRedispatch = "weft-infra-redispatch"

// startToCloseSlack is added to a node's timeout for Temporal's
// start-to-close timer: the activity stops itself at the node's deadline
// (plus a second's grace for its handler) and needs a moment to report.
const startToCloseSlack = 5 * time.Second

// Redispatch backoff: first, doubling, cap. Short, because a lost lease has
// already cost the lease timeout, and bounded by Durability's limits.
const (
	redispatchFirst = 250 * time.Millisecond
	redispatchCap   = 10 * time.Second
)

// redispatchDelay is the wait before the k-th re-dispatch of a node (k >= 1).
func redispatchDelay(k int) time.Duration {
	d := redispatchFirst
	for ; k > 1 && d < redispatchCap; k-- {
		d *= 2
	}
	return min(d, redispatchCap)
}

// activityTimeouts are a non-local attempt's start-to-close and heartbeat
// timeouts for a node timeout.
func (i *interpreter) activityTimeouts(timeout time.Duration) (startToClose, heartbeat time.Duration) {
	if !i.infra {
		return timeout, min(maxHeartbeatTimeout, timeout)
	}
	lease := i.durability.LeaseTimeout()
	return timeout + max(lease, startToCloseSlack), lease
}

// infraFault returns the infrastructure fault an attempt's error is, or ""
// for the node's own failure. Local activities run inside the workflow
// task, so a lost worker replays them instead of timing them out: only
// their own error types count.
func (i *interpreter) infraFault(n *node, err error) string {
	if !i.infra {
		return ""
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) && !isLocal(n.plan.Kind) {
		switch timeout.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_HEARTBEAT, enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
			return execution.InfraLeaseLost
		}
		return ""
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && execution.IsInfraError(app.Type()) {
		return app.Type()
	}
	return ""
}

// redispatchLater records an attempt lost to an infrastructure fault and
// arranges for the same attempt to go out again, unless the node has used
// up the run's Durability: then it returns a failure for attemptFailed to
// end the node with.
func (i *interpreter) redispatchLater(n *node, code string, f failure) (exhausted *failure) {
	now := i.now()
	st := &n.state
	st.Redispatches++
	if st.InfraSince == nil {
		since := now
		st.InfraSince = &since
	}
	d := i.durability
	window := time.Duration(d.MaxRedispatchMs) * time.Millisecond
	if st.Redispatches > d.MaxRedispatches || now.Sub(*st.InfraSince) > window {
		return &failure{
			typ: execution.ErrInfraUnavailable,
			message: fmt.Sprintf("attempt %d met %d infrastructure faults over %s (the run allows %d re-dispatches within %s); the last: %s: %s",
				st.Attempt, st.Redispatches, now.Sub(*st.InfraSince).Round(time.Millisecond), d.MaxRedispatches, window, code, f.message),
		}
	}
	delay := redispatchDelay(st.Redispatches)
	if i.simulation {
		delay = 0 // nothing sleeps in a simulation; infra faults move no virtual time
	}
	delayMs := delay.Milliseconds()
	typ := execution.EventNodeAttemptInfraRetry
	if code == execution.InfraLeaseLost {
		typ = execution.EventNodeAttemptLeaseLost
		f.typ = code
	}
	ev := execution.EventData{Attempt: st.Attempt, Code: code, Redispatch: st.Redispatches, DelayMs: &delayMs}
	errorData(&ev, f)
	i.record(typ, n, ev)

	st.Redispatch, st.Infra = true, code
	if delay <= 0 {
		n.due = true
		return nil
	}
	at := now.Add(delay)
	st.RetryAt, n.backoff = &at, delay
	return nil // schedule arms the timer after the flush
}

// redispatch sends a lost attempt out again: same attempt number, no new
// node.started (the lease_lost or infra_retry event already says it will).
func (i *interpreter) redispatch(n *node) {
	n.state.Redispatch, n.state.RetryAt = false, nil
	n.due, n.start = false, true
}

// armRedispatchTimer waits out a re-dispatch backoff on a cancellable timer.
func (i *interpreter) armRedispatchTimer(n *node) {
	ctx, cancel := workflow.WithCancel(i.work)
	n.timer = workflow.NewTimerWithOptions(ctx, n.backoff, workflow.TimerOptions{
		Summary: fmt.Sprintf("%s · re-dispatch attempt %d", n.plan.ID, n.state.Attempt),
	})
	n.timerCancel = cancel
}

// awaitingRedispatch: a running node whose attempt was lost and waits to go
// out again.
func awaitingRedispatch(n *node) bool {
	return n.state.Status == execution.NodeRunning && n.state.Redispatch && n.future == nil && !n.start
}
