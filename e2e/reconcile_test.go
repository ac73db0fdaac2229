package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/reconciler"
)

func TestRunsClosedOutsideWeftAreReconciled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	rev := e.publish("nap", cancelGraph)

	// One run terminated with the Temporal CLI mid-node, one whose
	// workflow times out (a timeout weft never sets).
	terminated := e.run("nap", map[string]any{})
	timedOut, _ := e.startDirect("nap", rev, map[string]any{}, nil, func(o *client.StartWorkflowOptions) {
		o.WorkflowExecutionTimeout = 2 * time.Second
	})
	e.waitForEvent(terminated, "node.started nap", 20*time.Second)
	wid := e.getRun(terminated).Temporal.WorkflowID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, testinfra.TemporalBinary(), "workflow", "terminate",
		"--workflow-id", wid, "--reason", "drill: terminated by an operator",
		"--address", e.temporal.HostPort, "--namespace", "default").CombinedOutput()
	require.NoError(t, err, "%s", out)
	terminatedAt := time.Now()

	// The reconciler loop, as the worker runs it (with a short interval).
	r, err := reconciler.New(reconciler.Deps{Store: e.st, Temporal: e.tc, Logger: e.log})
	require.NoError(t, err)
	loop, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go r.Run(loop, 250*time.Millisecond)

	for _, c := range []struct {
		id, status string
	}{{terminated, "TERMINATED"}, {timedOut, "TIMED_OUT"}} {
		v := e.wait(c.id, time.Minute)
		require.Equal(t, execution.StatusFailed, v.Status, c.status)
		require.NotNil(t, v.Error)
		require.Equal(t, reconciler.ReasonClosedOutsideWeft, v.Error.Code)
		require.Contains(t, v.Error.Message, c.status)

		events := e.events(c.id)
		last := events[len(events)-1]
		require.Equal(t, execution.EventRunFailed, last.Type)
		var ev reconciler.Evidence
		require.NoError(t, json.Unmarshal(last.Data, &ev))
		require.Equal(t, reconciler.ReasonClosedOutsideWeft, ev.Reason)
		require.Equal(t, c.status, ev.TemporalStatus)
		require.False(t, ev.CloseTime.IsZero())
		require.True(t, last.At.Equal(ev.CloseTime.Truncate(time.Microsecond)), "the event is dated when Temporal closed the run")
		require.NotEmpty(t, ev.TemporalRunID)
		require.NotNil(t, ev.RunError)
		if c.status == "TERMINATED" {
			require.Equal(t, "drill: terminated by an operator", ev.TemporalReason)
			require.NotEmpty(t, ev.Identity)
			require.Less(t, time.Since(terminatedAt), time.Minute)
		}
		e.checkChain(c.id)

		// The projection does not claim work runs on a closed run: nodes
		// the interpreter never settled show cancelled (execution.ReasonRunClosed), while
		// the log keeps what was recorded.
		for _, n := range v.Nodes {
			switch n.Status {
			case execution.NodeRunning, execution.NodeWaiting, execution.NodePending:
				t.Fatalf("%s: node %s is still %s on a %s run", c.status, n.ID, n.Status, v.Status)
			}
		}
		if c.status == "TERMINATED" {
			status, _, _, reason := v.node(t, "in")
			require.Equal(t, execution.NodeSucceeded, status)
			require.Empty(t, reason)
			status, attempt, _, reason := v.node(t, "nap")
			require.Equal(t, execution.NodeCancelled, status, "nap was mid-attempt when Temporal terminated the run")
			require.Equal(t, execution.ReasonRunClosed, reason)
			require.Equal(t, 1, attempt)
			for _, id := range []string{"after", "out"} {
				status, attempt, _, reason = v.node(t, id)
				require.Equal(t, execution.NodeCancelled, status, id)
				require.Equal(t, execution.ReasonRunClosed, reason, id)
				require.Zero(t, attempt, id)
			}
			var napEvents []string
			for _, ev := range events {
				if ev.NodeID == "nap" {
					napEvents = append(napEvents, ev.Type)
				}
			}
			require.Equal(t, []string{execution.EventNodeStarted}, napEvents, "the log is not rewritten")
		}
	}

	// Another pass changes nothing: the rows are terminal now.
	res, err := r.Reconcile(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Checked)
	require.Empty(t, res.Settled)
}

// TestRecentPassAsksTemporalOnlyAboutClosedRuns: a recent pass finds a run
// terminated outside weft through Temporal's visibility and settles it,
// while a run still running costs it no Temporal request, and a close
// before its window is not its business (the full pass's).
func TestRecentPassAsksTemporalOnlyAboutClosedRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("nap", cancelGraph)
	terminated, running := e.run("nap", map[string]any{}), e.run("nap", map[string]any{})
	e.waitForEvent(terminated, "node.started nap", 20*time.Second)
	e.waitForEvent(running, "node.started nap", 20*time.Second)
	since := time.Now().Add(-time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.tc.TerminateWorkflow(ctx, e.getRun(terminated).Temporal.WorkflowID, "", "drill: terminated by an operator"))

	r, err := reconciler.New(reconciler.Deps{Store: e.st, Temporal: e.tc, Logger: e.log})
	require.NoError(t, err)
	later, err := r.ReconcileRecent(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, later.Checked, "a close before the window is left to the full pass")

	// Visibility lists a close a moment after it happens.
	var res reconciler.Result
	require.Eventually(t, func() bool {
		res, err = r.ReconcileRecent(ctx, since)
		require.NoError(t, err)
		return len(res.Settled) == 1
	}, 30*time.Second, 200*time.Millisecond, "the terminated run was never settled by a recent pass")
	require.Equal(t, 1, res.Checked, "only the closed run's workflow is described, not the running one's")
	require.Equal(t, terminated, res.Settled[0])
	v := e.wait(terminated, 10*time.Second)
	require.Equal(t, execution.StatusFailed, v.Status)
	require.Equal(t, reconciler.ReasonClosedOutsideWeft, v.Error.Code)
	e.checkChain(terminated)

	again, err := r.ReconcileRecent(ctx, since)
	require.NoError(t, err)
	require.Zero(t, again.Checked, "a settled run is not asked about again")
	require.Equal(t, execution.StatusRunning, e.getRun(running).Status)
}
