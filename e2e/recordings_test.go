package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
)

// sizesGraph echoes three parts of its input: 2 KiB (inline in its event),
// 20 KiB (left out of its event: a node_results row) and 300 KiB
// (claim-checked), and returns them merged.
const sizesGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "small", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1},
     "mapping": {"v": {"pointer": "/in/small"}}},
    {"id": "mid", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1},
     "mapping": {"v": {"pointer": "/in/mid"}}},
    {"id": "large", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1},
     "mapping": {"v": {"pointer": "/in/large"}}},
    {"id": "join", "kind": "merge", "inputs": {"small": "any", "mid": "any", "large": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "small.in"}, {"from": "in.out", "to": "mid.in"}, {"from": "in.out", "to": "large.in"},
    {"from": "small.out", "to": "join.small"}, {"from": "mid.out", "to": "join.mid"}, {"from": "large.out", "to": "join.large"},
    {"from": "join.out", "to": "out.in"}
  ]
}`

// A live run records every node result, whatever its size, and the
// fixtures derived from its recording replay it exactly: a simulation of
// the same revision with them returns the live run's output (the 20 KiB
// and 300 KiB outputs included) and calls no action.
func TestLiveRunRecordingReplaysWithItsOutputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cnt := e.startCountingWorker()
	rev := e.publish("sizes", sizesGraph)
	input := map[string]string{
		"small": strings.Repeat("s", 2<<10), "mid": strings.Repeat("m", 20<<10), "large": strings.Repeat("l", 300<<10),
	}
	runID := e.run("sizes", input)
	live := e.wait(runID, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, live.Status, "%v", e.eventTypes(runID))
	handlers := cnt.handlers.Load()
	require.EqualValues(t, 3, handlers)

	ctx := context.Background()
	rec, err := e.st.RunRecording(ctx, e.tenant, runID)
	require.NoError(t, err)
	require.True(t, rec.Replayable, "reason %s", rec.Reason)
	for id, part := range map[string]string{"small": "small", "mid": "mid", "large": "large"} {
		n := rec.Nodes[id]
		require.True(t, n.Recorded, id)
		require.JSONEq(t, `{"v":"`+input[part]+`"}`, string(n.Output), id)
	}
	// Only the 20 KiB result needed a row of its own; the merge's output
	// (over 300 KiB) is claim-checked.
	var rows int
	require.NoError(t, e.st.Pool.QueryRow(ctx, `SELECT count(*) FROM node_results WHERE run_id = $1`, runID).Scan(&rows))
	require.Equal(t, 1, rows)

	compiled, err := e.st.GetCompiled(ctx, e.tenant, live.Checksum)
	require.NoError(t, err)
	set, unrecorded, err := fixtures.FromRecording(&compiled.Document, rec.NodeResults(), nil)
	require.NoError(t, err)
	require.Empty(t, unrecorded)
	raw, err := json.Marshal(set)
	require.NoError(t, err)
	require.Greater(t, len(raw), fixtures.MaxBytes, "the derived fixtures exceed what a request may send")

	req := starter.Request{WorkflowKey: "sizes", Input: live.Input, IdempotencyKey: uuid.NewString(),
		Mode: execution.ModeSimulation, Revision: &rev, Fixtures: raw}
	trusted := starter.Trusted{TenantID: e.tenant, Actor: execution.Actor{Kind: "user", Sub: "alice"},
		Origin: execution.Origin{Kind: "api"}, Permissions: []string{auth.ScopeRunsExecute}}
	_, err = e.starter.Enqueue(ctx, req, trusted)
	require.Equal(t, starter.CodeInvalidFixtures, failure.CodeOf(err), "a client's fixtures stay bounded: %v", err)
	req.DerivedFixtures = true
	acc, err := e.starter.Enqueue(ctx, req, trusted)
	require.NoError(t, err)
	sim := e.wait(acc.RunID, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, sim.Status, "%v", e.eventTypes(acc.RunID))
	require.JSONEq(t, string(live.Output), string(sim.Output))
	require.Equal(t, handlers, cnt.handlers.Load(), "the replay called no action")
}

// replayRecording derives fixtures from the recording of live run runID and
// simulates its revision with them, returning the simulated run.
func (e *env) replayRecording(key string, rev int, runID string) (store.RunRecording, runView) {
	e.t.Helper()
	ctx := context.Background()
	rec, err := e.st.RunRecording(ctx, e.tenant, runID)
	require.NoError(e.t, err)
	require.True(e.t, rec.Replayable, "reason %s", rec.Reason)
	live := e.getRun(runID)
	compiled, err := e.st.GetCompiled(ctx, e.tenant, live.Checksum)
	require.NoError(e.t, err)
	set, _, err := fixtures.FromRecording(&compiled.Document, rec.NodeResults(), nil)
	require.NoError(e.t, err)
	raw, err := json.Marshal(set)
	require.NoError(e.t, err)
	acc, err := e.starter.Enqueue(ctx, starter.Request{WorkflowKey: key, Input: live.Input, IdempotencyKey: uuid.NewString(),
		Mode: execution.ModeSimulation, Revision: &rev, Fixtures: raw, DerivedFixtures: true},
		starter.Trusted{TenantID: e.tenant, Actor: execution.Actor{Kind: "user", Sub: "alice"},
			Origin: execution.Origin{Kind: "api"}, Permissions: []string{auth.ScopeRunsExecute}})
	require.NoError(e.t, err)
	return rec, e.wait(acc.RunID, 60*time.Second)
}

// Approval nodes replay their recorded decision: a rejected run's replay
// is rejected again, an approved one's approved, with nobody deciding.
func TestApprovalDecisionsReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	rev := e.publish("gate", gateGraph)
	for _, decision := range []string{"reject", "approve"} {
		id := e.run("gate", map[string]any{"order": decision})
		e.waitAwaiting(id, "ok")
		res := e.decide(e.token, id, "ok", map[string]any{"decision": decision})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		live := e.wait(id, 30*time.Second)
		require.Equal(t, execution.StatusSucceeded, live.Status, "%v", e.eventTypes(id))

		rec, sim := e.replayRecording("gate", rev, id)
		require.Equal(t, decision, rec.Nodes["ok"].Decision)
		require.Equal(t, execution.StatusSucceeded, sim.Status, "%v", e.eventTypes(sim.RunID))
		_, _, livePort, _ := live.node(t, "ok")
		_, _, simPort, _ := sim.node(t, "ok")
		require.Equal(t, livePort, simPort, decision)
		require.JSONEq(t, string(live.Output), string(sim.Output), decision)
	}
}

// flakyGraph fails until the attempt the input names, two attempts at most.
const flakyGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "flaky", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.fail", "version": 1},
     "mapping": {"untilAttempt": {"pointer": "/in/until"}, "value": {"pointer": "/in"}},
     "retry": {"maxAttempts": 2, "initialIntervalMs": 10, "maxIntervalMs": 10}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "flaky.in"}, {"from": "flaky.out", "to": "out.in"}]
}`

// A node's final result replays, not its retries: a node that succeeded
// on its second attempt replays its output; one that failed every attempt
// fails its replay with the recorded error.
func TestFailuresAndRetriesReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	rev := e.publish("flaky", flakyGraph)

	ok := e.run("flaky", map[string]any{"until": 2})
	live := e.wait(ok, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, live.Status, "%v", e.eventTypes(ok))
	rec, sim := e.replayRecording("flaky", rev, ok)
	require.Equal(t, 2, rec.Nodes["flaky"].Attempts)
	require.Equal(t, execution.StatusSucceeded, sim.Status, "%v", e.eventTypes(sim.RunID))
	require.JSONEq(t, string(live.Output), string(sim.Output))
	_, attempts, _, _ := sim.node(t, "flaky")
	require.Equal(t, 1, attempts, "the replay reproduces the result, not the retries")

	failed := e.run("flaky", map[string]any{"until": 5})
	live = e.wait(failed, 30*time.Second)
	require.Equal(t, execution.StatusFailed, live.Status, "%v", e.eventTypes(failed))
	rec, sim = e.replayRecording("flaky", rev, failed)
	nodeErr := rec.Nodes["flaky"].Error
	require.NotNil(t, nodeErr)
	require.Equal(t, execution.StatusFailed, sim.Status, "%v", e.eventTypes(sim.RunID))
	require.Equal(t, live.Error.Code, sim.Error.Code)
	require.Equal(t, live.Error.NodeID, sim.Error.NodeID)
	_, _, _, reason := sim.node(t, "flaky")
	require.Equal(t, nodeErr.Type, reason, "the recorded error type")
}
