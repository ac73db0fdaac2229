package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/store"
)

// Graph shapes run end to end. Each test asserts the final status, the
// output and the exact event sequence ("type node" lines, node omitted for
// run events).

const linearGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "echo", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "echo.in"}, {"from": "echo.out", "to": "out.in"}]
}`

// diamondGraph: a gate routes to one of two echoes; a merge joins them, so
// one of its inputs is always dead.
const diamondGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "check", "kind": "gate", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "language": "cel/v1", "expression": "input.ok == true"},
    {"id": "yes", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "no", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "join", "kind": "merge", "inputs": {"yes": "any", "no": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "check.in"},
    {"from": "check.pass", "to": "yes.in"}, {"from": "check.fail", "to": "no.in"},
    {"from": "yes.out", "to": "join.yes"}, {"from": "no.out", "to": "join.no"},
    {"from": "join.out", "to": "out.in"}
  ]
}`

// validatorGraph: valid input settles "accepted"; invalid input takes the
// fail branch through an echo to "rejected" with the validation errors.
const validatorGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "valid", "kind": "validator", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}},
    {"id": "accepted", "kind": "output", "inputs": {"in": "any"}},
    {"id": "explain", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "rejected", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "valid.in"},
    {"from": "valid.pass", "to": "accepted.in"},
    {"from": "valid.fail", "to": "explain.in"}, {"from": "explain.out", "to": "rejected.in"}
  ]
}`

// allDeadMergeGraph: both merge inputs hang off the gate's pass port; when
// the gate fails the merge is skipped and the run settles on the fallback.
const allDeadMergeGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "check", "kind": "gate", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "language": "cel/v1", "expression": "input.ok == true"},
    {"id": "join", "kind": "merge", "inputs": {"a": "any", "b": "any"}, "outputs": {"out": "any"}},
    {"id": "main", "kind": "output", "inputs": {"in": "any"}},
    {"id": "fallback", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "check.in"},
    {"from": "check.pass", "to": "join.a"}, {"from": "check.pass", "to": "join.b"},
    {"from": "join.out", "to": "main.in"},
    {"from": "check.fail", "to": "fallback.in"}
  ]
}`

// twoOutputsGraph: a fast path and a slow path each reach an output; the
// fast one settles the run while the slow one is still sleeping.
const twoOutputsGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "fast", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "slow", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 3000}}},
    {"id": "first", "kind": "output", "inputs": {"in": "any"}},
    {"id": "second", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "fast.in"}, {"from": "in.out", "to": "slow.in"},
    {"from": "fast.out", "to": "first.in"}, {"from": "slow.out", "to": "second.in"}
  ]
}`

// noOutputGraph: the only output hangs off the gate's pass port.
const noOutputGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "check", "kind": "gate", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "language": "cel/v1", "expression": "input.ok == true"},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "check.in"}, {"from": "check.pass", "to": "out.in"}]
}`

// outOfAttemptsGraph: "flaky" never succeeds within its 2 attempts while
// its sibling sleeps; the run fails and the sleeper is cancelled. The sleep
// is far longer than the cancellation takes to arrive (a busy machine once
// let a 3 s sleep finish first, a late result), and the run ends as soon as
// it acknowledges.
const outOfAttemptsGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "flaky", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.fail", "version": 1},
     "mapping": {"untilAttempt": {"literal": 5}, "value": {"pointer": "/in"}},
     "retry": {"maxAttempts": 2, "initialIntervalMs": 100, "backoff": 2}},
    {"id": "nap", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 20000}}},
    {"id": "join", "kind": "merge", "inputs": {"a": "any", "b": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "flaky.in"}, {"from": "in.out", "to": "nap.in"},
    {"from": "flaky.out", "to": "join.a"}, {"from": "nap.out", "to": "join.b"},
    {"from": "join.out", "to": "out.in"}
  ]
}`

// retryGraph: "flaky" fails attempts 1 and 2 and returns its value on 3.
const retryGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "flaky", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.fail", "version": 1},
     "mapping": {"untilAttempt": {"literal": 3}, "value": {"pointer": "/in"}},
     "retry": {"maxAttempts": 3, "initialIntervalMs": 200, "backoff": 2}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "flaky.in"}, {"from": "flaky.out", "to": "out.in"}]
}`

func TestLinearChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("linear", linearGraph)
	id := e.run("linear", map[string]any{"msg": "hi"})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	require.JSONEq(t, `{"msg":"hi"}`, string(v.Output))
	require.Equal(t, []string{
		"run.started",
		"node.started in", "node.completed in", "edge.taken in",
		"node.started echo",
		"node.completed echo", "edge.taken echo",
		"node.started out", "node.completed out",
		"run.succeeded",
	}, e.eventTypes(id))
	status, attempt, port, _ := v.node(t, "echo")
	require.Equal(t, execution.NodeSucceeded, status)
	require.Equal(t, 1, attempt)
	require.Equal(t, "out", port)
	e.checkChain(id)
}

func TestDiamondWithGate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("diamond", diamondGraph)

	t.Run("pass", func(t *testing.T) {
		id := e.run("diamond", map[string]any{"ok": true, "n": 1})
		v := e.wait(id, 30*time.Second)
		require.Equal(t, execution.StatusSucceeded, v.Status)
		require.JSONEq(t, `{"yes":{"ok":true,"n":1}}`, string(v.Output))
		require.Equal(t, []string{
			"run.started",
			"node.started in", "node.completed in", "edge.taken in",
			"node.started check",
			"node.completed check", "edge.dead check", "edge.taken check",
			"node.skipped no", "edge.dead no",
			"node.started yes",
			"node.completed yes", "edge.taken yes",
			"node.started join",
			"node.completed join", "edge.taken join",
			"node.started out", "node.completed out",
			"run.succeeded",
		}, e.eventTypes(id))
		_, _, port, _ := v.node(t, "check")
		require.Equal(t, "pass", port)
		status, _, _, reason := v.node(t, "no")
		require.Equal(t, execution.NodeSkipped, status)
		require.Equal(t, execution.SkipDeadInput, reason)
		e.checkChain(id)
	})
	t.Run("fail", func(t *testing.T) {
		id := e.run("diamond", map[string]any{"ok": false})
		v := e.wait(id, 30*time.Second)
		require.Equal(t, execution.StatusSucceeded, v.Status)
		require.JSONEq(t, `{"no":{"ok":false}}`, string(v.Output))
		require.Equal(t, []string{
			"run.started",
			"node.started in", "node.completed in", "edge.taken in",
			"node.started check",
			"node.completed check", "edge.taken check", "edge.dead check",
			"node.skipped yes", "edge.dead yes",
			"node.started no",
			"node.completed no", "edge.taken no",
			"node.started join",
			"node.completed join", "edge.taken join",
			"node.started out", "node.completed out",
			"run.succeeded",
		}, e.eventTypes(id))
		e.checkChain(id)
	})
}

func TestValidatorFailBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("validate", validatorGraph)

	id := e.run("validate", map[string]any{"name": "no id"})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	var out struct {
		Value  map[string]any `json:"value"`
		Errors []any          `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(v.Output, &out), "%s", v.Output)
	require.Equal(t, map[string]any{"name": "no id"}, out.Value)
	require.NotEmpty(t, out.Errors)
	require.Equal(t, []string{
		"run.started",
		"node.started in", "node.completed in", "edge.taken in",
		"node.started valid",
		"node.completed valid", "edge.taken valid", "edge.dead valid",
		"node.skipped accepted",
		"node.started explain",
		"node.completed explain", "edge.taken explain",
		"node.started rejected", "node.completed rejected",
		"run.succeeded",
	}, e.eventTypes(id))
	status, _, _, reason := v.node(t, "accepted")
	require.Equal(t, execution.NodeSkipped, status)
	require.Equal(t, execution.SkipDeadInput, reason)

	ok := e.run("validate", map[string]any{"id": "x"})
	v = e.wait(ok, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	require.JSONEq(t, `{"id":"x"}`, string(v.Output))
	status, _, _, reason = v.node(t, "rejected")
	require.Equal(t, execution.NodeSkipped, status)
	require.Equal(t, execution.SkipDeadInput, reason)
}

func TestAllDeadMergeIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("alldead", allDeadMergeGraph)
	id := e.run("alldead", map[string]any{"ok": false})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	require.JSONEq(t, `{"ok":false}`, string(v.Output))
	require.Equal(t, []string{
		"run.started",
		"node.started in", "node.completed in", "edge.taken in",
		"node.started check",
		// Compiled order breaks ties by id (fallback before join) and ports
		// resolve in name order (fail before pass).
		"node.completed check", "edge.taken check", "edge.dead check", "edge.dead check",
		"node.started fallback", "node.completed fallback",
		"node.skipped join", "edge.dead join",
		"node.skipped main",
		"run.succeeded",
	}, e.eventTypes(id))
	status, _, _, reason := v.node(t, "join")
	require.Equal(t, execution.NodeSkipped, status)
	require.Equal(t, execution.SkipDeadInput, reason)
}

func TestFirstOutputWinsAndTheOtherIsSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("race", twoOutputsGraph)
	id := e.run("race", map[string]any{"v": 1})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	require.JSONEq(t, `{"v":1}`, string(v.Output))
	require.Equal(t, []string{
		"run.started",
		"node.started in", "node.completed in", "edge.taken in", "edge.taken in",
		"node.started fast", "node.started slow",
		"node.completed fast", "edge.taken fast",
		"node.started first", "node.completed first",
		"node.skipped second",
		"node.cancel.acknowledged slow",
		"run.succeeded",
	}, e.eventTypes(id))
	status, _, _, reason := v.node(t, "second")
	require.Equal(t, execution.NodeSkipped, status)
	require.Equal(t, execution.SkipSettled, reason)
	status, _, _, _ = v.node(t, "slow")
	require.Equal(t, execution.NodeCancelled, status)
}

func TestNoOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("nooutput", noOutputGraph)
	id := e.run("nooutput", map[string]any{"ok": false})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusFailed, v.Status)
	require.NotNil(t, v.Error)
	require.Equal(t, execution.RunErrNoOutput, v.Error.Code)
	require.Equal(t, "null", string(v.Output))
	require.Equal(t, []string{
		"run.started",
		"node.started in", "node.completed in", "edge.taken in",
		"node.started check",
		"node.completed check", "edge.dead check",
		"node.skipped out",
		"run.failed",
	}, e.eventTypes(id))
}

func TestNodeOutOfAttemptsFailsTheRunAndCancelsSiblings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("exhaust", outOfAttemptsGraph)
	id := e.run("exhaust", map[string]any{"v": 1})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusFailed, v.Status)
	require.NotNil(t, v.Error)
	require.Equal(t, execution.RunErrNodeFailed, v.Error.Code)
	require.Equal(t, "flaky", v.Error.NodeID)
	require.Equal(t, []string{
		"run.started",
		"node.started in", "node.completed in", "edge.taken in", "edge.taken in",
		"node.started flaky", "node.started nap",
		"node.attempt.failed flaky", "node.retry.scheduled flaky",
		"node.started flaky",
		"node.attempt.failed flaky", "node.failed flaky",
		"node.skipped join", "node.skipped out",
		"node.cancel.acknowledged nap",
		"run.failed",
	}, e.eventTypes(id))
	status, attempt, _, _ := v.node(t, "flaky")
	require.Equal(t, execution.NodeFailed, status)
	require.Equal(t, 2, attempt)
	status, _, _, _ = v.node(t, "nap")
	require.Equal(t, execution.NodeCancelled, status)
}

func TestRetryScheduledWithDelays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("retry", retryGraph)
	id := e.run("retry", map[string]any{"v": 7})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	require.JSONEq(t, `{"v":7}`, string(v.Output))
	require.Equal(t, []string{
		"run.started",
		"node.started in", "node.completed in", "edge.taken in",
		"node.started flaky",
		"node.attempt.failed flaky", "node.retry.scheduled flaky",
		"node.started flaky",
		"node.attempt.failed flaky", "node.retry.scheduled flaky",
		"node.started flaky",
		"node.completed flaky", "edge.taken flaky",
		"node.started out", "node.completed out",
		"run.succeeded",
	}, e.eventTypes(id))

	// Each retry records its delay, and the next attempt starts no sooner.
	evs := e.events(id)
	var delays []int64
	for k, ev := range evs {
		if ev.Type != execution.EventNodeRetryScheduled {
			continue
		}
		var d execution.EventData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.NotNil(t, d.DelayMs)
		delays = append(delays, *d.DelayMs)
		require.Equal(t, ev.Attempt+1, d.NextAttempt)
		next := evs[k+1]
		require.Equal(t, execution.EventNodeStarted, next.Type)
		require.Equal(t, d.NextAttempt, next.Attempt)
		require.GreaterOrEqual(t, next.At.Sub(ev.At), time.Duration(*d.DelayMs)*time.Millisecond-time.Millisecond)
	}
	require.Equal(t, []int64{200, 400}, delays)
	status, attempt, _, _ := v.node(t, "flaky")
	require.Equal(t, execution.NodeSucceeded, status)
	require.Equal(t, 3, attempt)
	e.checkChain(id)
}

func TestNotesAreListedWithRunAndNodeAndEditsBreakTheChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("notes", notesGraph)
	id := e.run("notes", map[string]any{"title": "hello", "n": 1})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))

	res := e.do(http.MethodGet, "/v1/notes", e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	notes := res.JSON(t)["notes"].([]any)
	require.Len(t, notes, 1)
	note := notes[0].(map[string]any)
	require.Equal(t, id, note["runId"])
	require.Equal(t, "save", note["nodeId"])
	require.Equal(t, "hello", note["title"])
	require.Equal(t, map[string]any{"title": "hello", "n": float64(1)}, note["body"])
	require.Nil(t, res.JSON(t)["nextCursor"])
	// Notes are tenant-owned.
	res = e.do(http.MethodGet, "/v1/notes", e.mint(e.other, "eve", auth.AllScopes...), nil)
	require.Empty(t, res.JSON(t)["notes"])

	// The chain verifies, and an edited event is detected at its seq.
	e.checkChain(id)
	_, err := e.st.Pool.Exec(context.Background(), `UPDATE run_events SET data = '{"port":"forged"}' WHERE run_id = $1 AND seq = 3`, id)
	require.NoError(t, err)
	err = e.st.VerifyChain(context.Background(), e.tenant, id)
	var ce *store.ChainError
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, 3, ce.Seq)
}
