package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
)

const oneAction = `
in  input
a   action in=in.out
out output in=a.out
`

// Infrastructure faults re-dispatch the same attempt, with a doubling
// backoff, and never touch the node's attempts: a node with one attempt
// survives two of them.
func TestInfraFaultsSpendNoAttempt(t *testing.T) {
	w := newWF(t, oneAction, map[string][]step{"a": {{lose: execution.ErrWorkerDrained, loseTimes: 2}}})
	var timers []time.Duration
	w.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.attempt.infra_retry a",
		"--", "node.attempt.infra_retry a",
		"--", "node.completed a", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	require.Equal(t, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}, timers)

	var retries []execution.EventData
	for _, e := range w.f.events() {
		if e.Type == execution.EventNodeAttemptInfraRetry {
			require.Equal(t, 1, e.Attempt)
			retries = append(retries, eventData(t, e))
		}
	}
	require.Len(t, retries, 2)
	for k, d := range retries {
		require.Equal(t, execution.ErrWorkerDrained, d.Code)
		require.Equal(t, k+1, d.Redispatch)
		require.Equal(t, 1, d.Attempt)
		require.Equal(t, timers[k].Milliseconds(), *d.DelayMs)
		require.Equal(t, execution.ErrWorkerDrained, d.Error.Type)
	}
	in := w.f.nodeInputs("a")
	require.Len(t, in, 3)
	for k, d := range in {
		require.Equal(t, 1, d.Attempt)
		require.Equal(t, k, d.Redispatch)
	}
	var states []execution.NodeState
	v, err := w.env.QueryWorkflow(execution.QueryState)
	require.NoError(t, err)
	require.NoError(t, v.Get(&states))
	require.Equal(t, execution.NodeSucceeded, states[1].Status)
	require.Equal(t, 2, states[1].Redispatches)
	require.Equal(t, execution.ErrWorkerDrained, states[1].Infra)
}

// A lost lease is a timeout of type HEARTBEAT (or START_TO_CLOSE) of a
// regular activity; other timeouts and the node's own errors are not faults.
func TestInfraFaultClassification(t *testing.T) {
	in := &interpreter{infra: true}
	actionPlan, diamondPlan := parsePlan(t, oneAction), parsePlan(t, diamond)
	action := &node{plan: &actionPlan.Nodes[1]}
	gate := &node{plan: &diamondPlan.Nodes[1]}
	hb := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
	stc := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
	require.Equal(t, execution.InfraLeaseLost, in.infraFault(action, hb))
	require.Equal(t, execution.InfraLeaseLost, in.infraFault(action, stc))
	require.Equal(t, "", in.infraFault(gate, stc), "a local activity's timeout is the node's own")
	for _, typ := range []string{execution.ErrWorkerDrained, execution.ErrStoreUnavailable, execution.ErrProviderUnavailable} {
		require.Equal(t, typ, in.infraFault(action, temporal.NewNonRetryableApplicationError("x", typ, nil)))
		require.Equal(t, typ, in.infraFault(gate, temporal.NewNonRetryableApplicationError("x", typ, nil)))
	}
	require.Equal(t, "", in.infraFault(action, temporal.NewApplicationError("x", execution.ErrActionTimeout)))
	require.Equal(t, "", in.infraFault(action, temporal.NewApplicationError("x", execution.ErrActionFailed)))

	old := &interpreter{}
	require.Equal(t, "", old.infraFault(action, hb), "runs before weft-infra-redispatch keep spending attempts")
}

// Past MaxRedispatchMs since the node's first fault the node fails with
// INFRA_UNAVAILABLE, naming the last fault.
func TestInfraWindowExhausted(t *testing.T) {
	w := newWF(t, oneAction, map[string][]step{"a": {{lose: execution.ErrStoreUnavailable, loseTimes: 99}}})
	p := testParams(execution.ModeLive)
	p.Durability = &execution.Durability{MaxRedispatchMs: 600}
	requireAppError(t, w.run(p), execution.RunErrNodeFailed)
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.attempt.infra_retry a",
		"--", "node.attempt.infra_retry a",
		"--", "node.attempt.failed a", "node.failed a", "node.skipped out CANCELLED", "run.failed",
	}, w.f.flushes())
	failed := eventData(t, findEvent(t, w.f.events(), execution.EventNodeFailed, "a", 1))
	require.Equal(t, execution.ErrInfraUnavailable, failed.Error.Type)
	require.Contains(t, failed.Error.Message, "STORE_UNAVAILABLE")
	checkLog(t, w.f, "run-1", 1, execution.StatusFailed)
}

// Cancelling a run whose node waits to be re-dispatched drops the
// re-dispatch: acknowledged at once, nothing sent out again.
func TestCancelWhileAwaitingRedispatch(t *testing.T) {
	w := newWF(t, oneAction, map[string][]step{"a": {{lose: execution.ErrWorkerDrained, loseTimes: 99}}})
	p := testParams(execution.ModeLive)
	w.env.RegisterDelayedCallback(w.env.CancelWorkflow, 5*time.Second)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, w.run(p), &canceled)
	events := w.f.events()
	ack := eventData(t, findEvent(t, events, execution.EventNodeCancelAcknowledged, "a", 1))
	require.Equal(t, execution.ReasonRedispatchWait, ack.Reason)
	checkLog(t, w.f, "run-1", 1, execution.StatusCancelled)
	dispatches := len(w.f.nodeInputs("a"))
	retries := 0
	for _, e := range events {
		if e.Type == execution.EventNodeAttemptInfraRetry {
			retries++
		}
	}
	require.Equal(t, dispatches, retries, "every dispatch ended in a fault and none went out after the cancellation")
}

// Continue-as-new carries a node waiting to be re-dispatched; the next
// execution sends the same attempt out after what is left of the backoff.
func TestContinueAsNewCarriesRedispatch(t *testing.T) {
	steps := map[string][]step{"a": {{lose: execution.ErrWorkerDrained}}}
	p := testParams(execution.ModeLive)
	p.ForceContinueAsNewAfterEvents = 6
	w1 := newWF(t, oneAction, steps)
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w1.env.SetStartTime(started)
	next := requireContinued(t, w1.run(p))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.attempt.infra_retry a", "run.continued",
	}, w1.f.flushes())
	carried := next.Carry.Nodes[1]
	require.Equal(t, execution.NodeRunning, carried.Status)
	require.True(t, carried.Redispatch)
	require.Equal(t, 1, carried.Redispatches)
	require.NotNil(t, carried.RetryAt)

	w2 := newWF(t, oneAction, steps)
	w2.env.SetStartTime(carried.RetryAt.Add(-100 * time.Millisecond))
	var timers []time.Duration
	w2.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	require.NoError(t, w2.run(next))
	require.Equal(t, []time.Duration{100 * time.Millisecond}, timers)
	require.Equal(t, []string{"node.completed a", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded"},
		w2.f.flushes())
	in := w2.f.nodeInputs("a")
	require.Len(t, in, 1)
	require.Equal(t, 1, in[0].Attempt)
	require.Equal(t, 1, in[0].Redispatch)
	checkLog(t, w2.f, "run-1", next.Carry.EventOrdinal+1, execution.StatusSucceeded)
}

func TestRedispatchDelay(t *testing.T) {
	var got []time.Duration
	for k := 1; k <= 8; k++ {
		got = append(got, redispatchDelay(k))
	}
	require.Equal(t, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
		4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, got)
}
