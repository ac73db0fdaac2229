package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/worker"
)

// cancelGraph sleeps long enough to be cancelled mid-node, then would echo.
const cancelGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "nap", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 60000}}, "timeoutMs": 90000},
    {"id": "after", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "nap.in"}, {"from": "nap.out", "to": "after.in"}, {"from": "after.out", "to": "out.in"}]
}`

// waitForEvent polls the run's log until it holds "type node".
func (e *env) waitForEvent(id, want string, timeout time.Duration) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return slices.Contains(e.eventTypes(id), want) }, timeout, 30*time.Millisecond,
		"run %s never recorded %q", id, want)
}

// checkCancelled asserts the cooperative cancellation of a run of cancelGraph.
func (e *env) checkCancelled(id string) {
	e.t.Helper()
	v := e.wait(id, 40*time.Second)
	require.Equal(e.t, execution.StatusCancelled, v.Status)
	require.NotNil(e.t, v.Error)
	require.Equal(e.t, execution.RunErrCancelled, v.Error.Code)
	types := e.eventTypes(id)
	require.Equal(e.t, []string{
		"run.started",
		"node.started in", "node.completed in", "edge.taken in",
		"node.started nap",
		"run.cancel.requested",
		"node.skipped after", "node.skipped out",
		"node.cancel.acknowledged nap",
		"run.cancelled",
	}, types)
	// No node starts once the cancellation is requested.
	k := slices.Index(types, "run.cancel.requested")
	for _, ev := range types[k:] {
		require.NotContains(e.t, ev, "node.started")
	}
	status, _, _, reason := v.node(e.t, "nap")
	require.Equal(e.t, execution.NodeCancelled, status)
	require.Equal(e.t, execution.SkipCancelled, reason)
	status, _, _, reason = v.node(e.t, "after")
	require.Equal(e.t, execution.NodeSkipped, status)
	require.Equal(e.t, execution.SkipCancelled, reason)
	e.checkChain(id)
}

func TestCancelThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("nap", cancelGraph)
	id := e.run("nap", map[string]any{})
	e.waitForEvent(id, "node.started nap", 20*time.Second)

	res := e.do(http.MethodPost, "/v1/runs/"+id+"/cancel", e.token, nil)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, id, res.JSON(t)["runId"])
	require.Equal(t, execution.StatusRunning, res.JSON(t)["status"])
	e.checkCancelled(id)

	// A finished run cannot be cancelled again.
	res = e.do(http.MethodPost, "/v1/runs/"+id+"/cancel", e.token, nil)
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, "RUN_NOT_ACTIVE", res.Code(t))
}

func TestCancelWithTheTemporalCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("nap", cancelGraph)
	id := e.run("nap", map[string]any{})
	e.waitForEvent(id, "node.started nap", 20*time.Second)

	wid := e.getRun(id).Temporal.WorkflowID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	temporal := func(args ...string) string {
		t.Helper()
		args = append(args, "--address", e.temporal.HostPort, "--namespace", "default")
		out, err := exec.CommandContext(ctx, testinfra.TemporalBinary(), args...).CombinedOutput()
		require.NoError(t, err, "temporal %v: %s", args, out)
		return string(out)
	}

	// The operator surfaces of the README, while the run is open: the
	// tenant's runs by search attribute (visibility is eventually
	// consistent), the node states by query, each attempt named in the
	// history.
	require.Eventually(t, func() bool {
		return strings.Contains(temporal("workflow", "list", "--query", "WeftTenant='"+e.tenant+"'"), wid)
	}, 10*time.Second, 200*time.Millisecond, "workflow list --query WeftTenant")
	require.NotContains(t, temporal("workflow", "list", "--query", "WeftTenant='"+e.other+"'"), wid)
	state := temporal("workflow", "query", "--workflow-id", wid, "--type", "state", "--output", "json")
	require.Contains(t, state, `"id": "nap"`, state)
	require.Regexp(t, `"id": "nap",\s+"kind": "action",\s+"status": "running"`, state)
	shown := temporal("workflow", "show", "--workflow-id", wid, "--detailed")
	require.Contains(t, shown, "userMetadata.summary: nap · action")
	require.Regexp(t, `activityType\.name\s*:?\s*weft\.Action`, shown, "attempts run as their kind's activity type")
	require.Contains(t, shown, "userMetadata.summary: load plan")

	temporal("workflow", "cancel", "--workflow-id", wid)
	e.checkCancelled(id)
}

// cancelDeliveryBound is the longest an activity may go without learning
// that it was cancelled, for a cooperative cancellation (SPEC §5) to reach
// nodes well within the interpreter's 30 s grace.
const cancelDeliveryBound = time.Second

// TestWorkerOptionsDeliverCancellationPromptly pins the production worker
// options: heartbeats must reach the server often enough for cancellation
// to reach a heartbeating node (core.sleep beats every second). With the
// SDK default a node with a 30 s heartbeat timeout hears of a cancellation
// only after up to 24 s, and a short node finishes first: its result is
// recorded as node.late.result instead of node.cancel.acknowledged.
func TestWorkerOptionsDeliverCancellationPromptly(t *testing.T) {
	t.Parallel()
	opts := worker.Options(config.Config{}, slog.Default())
	require.Greater(t, opts.MaxHeartbeatThrottleInterval, time.Duration(0), "worker.Options MaxHeartbeatThrottleInterval = %s; want (0, %s] so cancellations reach activities promptly", opts.MaxHeartbeatThrottleInterval, cancelDeliveryBound)
	require.LessOrEqual(t, opts.MaxHeartbeatThrottleInterval, cancelDeliveryBound, "worker.Options MaxHeartbeatThrottleInterval = %s; want (0, %s] so cancellations reach activities promptly", opts.MaxHeartbeatThrottleInterval, cancelDeliveryBound)
}
