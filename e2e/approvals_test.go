package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
)

// gateGraph waits up to an hour for a decision; each outcome has its output.
const gateGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "ok", "kind": "approval", "inputs": {"in": "any"},
     "outputs": {"approved": "any", "rejected": "any", "timedOut": "any"}, "timeoutMs": 3600000},
    {"id": "ship", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}},
    {"id": "refused", "kind": "output", "inputs": {"in": "any"}},
    {"id": "late", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "ok.in"}, {"from": "ok.approved", "to": "ship.in"}, {"from": "ship.out", "to": "out.in"},
    {"from": "ok.rejected", "to": "refused.in"}, {"from": "ok.timedOut", "to": "late.in"}
  ]
}`

// nodeState is one node of GET /v1/runs/{id}, with its approval.
type nodeState struct {
	ID       string                   `json:"id"`
	Status   string                   `json:"status"`
	Port     string                   `json:"port"`
	Approval *execution.ApprovalState `json:"approval"`
}

func (e *env) nodeState(id, node string) nodeState {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/runs/"+id, e.token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	var v struct {
		Nodes []nodeState `json:"nodes"`
	}
	require.NoError(e.t, json.Unmarshal(res.Body, &v))
	for _, n := range v.Nodes {
		if n.ID == node {
			return n
		}
	}
	e.t.Fatalf("run %s has no node %s", id, node)
	return nodeState{}
}

// waitAwaiting waits until node of run id waits for a decision.
func (e *env) waitAwaiting(id, node string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.nodeState(id, node).Status == execution.NodeAwaitingApproval },
		30*time.Second, 30*time.Millisecond, "node %s of run %s never waited for a decision: %v", node, id, e.eventTypes(id))
}

func (e *env) decide(token, id, node string, body any) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/v1/runs/"+id+"/approvals/"+node, token, body)
}

// approvalsOf lists the approvals GET /v1/approvals shows token for run id.
func (e *env) approvalsOf(token, id, status string) []map[string]any {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/approvals?status="+status+"&runId="+id, token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	for _, a := range res.JSON(e.t)["approvals"].([]any) {
		out = append(out, a.(map[string]any))
	}
	return out
}

// decidedEvents returns the data of the run's node.approval.decided events.
func (e *env) decidedEvents(id string) []execution.EventData {
	e.t.Helper()
	var out []execution.EventData
	for _, ev := range e.events(id) {
		if ev.Type == execution.EventNodeApprovalDecided {
			var d execution.EventData
			require.NoError(e.t, json.Unmarshal(ev.Data, &d))
			out = append(out, d)
		}
	}
	return out
}

// updateEvents counts the update events in the run's Temporal histories
// (every execution of its chain).
func (e *env) updateEvents(id string) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	it := e.tc.GetWorkflowHistory(ctx, e.getRun(id).Temporal.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED:
			n++
		}
	}
	return n
}

// storedDecisions counts the decisions weft's API stored for run id.
func (e *env) storedDecisions(id string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM approval_decisions WHERE run_id = $1`, id).Scan(&n))
	return n
}

// allScopesBut is every scope except the one named.
func allScopesBut(scope string) []string {
	return slices.DeleteFunc(slices.Clone(auth.AllScopes), func(s string) bool { return s == scope })
}

func TestApprovalThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("gate", gateGraph)
	id := e.run("gate", map[string]any{"order": 7})
	e.waitAwaiting(id, "ok")

	pending := e.approvalsOf(e.token, id, "pending")
	require.Len(t, pending, 1)
	require.Equal(t, "ok", pending[0]["nodeId"])
	require.Equal(t, "node", pending[0]["kind"])
	require.Equal(t, "gate", pending[0]["workflowKey"])
	require.NotEmpty(t, pending[0]["deadlineAt"])
	require.Empty(t, e.approvalsOf(e.mint(e.other, "mallory", auth.AllScopes...), id, "pending"), "another tenant sees nothing")

	// Refused before anything is recorded: no scope, another tenant, a
	// node that does not wait, a malformed decision.
	before := len(e.events(id))
	res := e.decide(e.mint(e.tenant, "bob", allScopesBut(auth.ScopeRunsApprove)...), id, "ok", map[string]any{"decision": "approve"})
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))
	res = e.decide(e.mint(e.other, "mallory", auth.AllScopes...), id, "ok", map[string]any{"decision": "approve"})
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	res = e.decide(e.token, id, "ship", map[string]any{"decision": "approve"})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "APPROVAL_NOT_WAITING", res.Code(t))
	res = e.decide(e.token, id, "ok", map[string]any{"decision": "maybe"})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, before, len(e.events(id)), "refusals append no event")
	require.Zero(t, e.storedDecisions(id), "refusals store no decision")
	require.Zero(t, e.updateEvents(id), "refusals reach no workflow")
	require.Equal(t, execution.NodeAwaitingApproval, e.nodeState(id, "ok").Status)

	res = e.decide(e.token, id, "ok", map[string]any{"decision": "approve", "comment": "checked the order"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got := res.JSON(t)
	require.Equal(t, "approved", got["status"])
	require.Equal(t, "approve", got["decision"])
	require.Equal(t, "alice", got["actor"].(map[string]any)["sub"])
	// The decision is in the log when the API answers.
	decided := e.decidedEvents(id)
	require.Len(t, decided, 1)
	require.Equal(t, &execution.Actor{Kind: execution.ActorUser, Sub: "alice"}, decided[0].Actor)
	require.Equal(t, "checked the order", decided[0].Comment)
	require.Empty(t, decided[0].UpdateID, "weft's own decision, not an operator's")

	// A second decision is refused, with what was decided.
	res = e.decide(e.token, id, "ok", map[string]any{"decision": "reject"})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "APPROVAL_ALREADY_DECIDED", res.Code(t))
	details := res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)
	require.Equal(t, "approve", details["decision"])

	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	require.JSONEq(t, `{"order":7}`, string(v.Output), "approved carries the node's input")
	ok := e.nodeState(id, "ok")
	require.Equal(t, execution.NodeSucceeded, ok.Status)
	require.Equal(t, "approved", ok.Port)
	require.Equal(t, execution.ApprovalApproved, ok.Approval.Status)
	require.Len(t, e.decidedEvents(id), 1)
	require.Equal(t, []map[string]any(nil), e.approvalsOf(e.token, id, "pending"))
	require.Equal(t, "approved", e.approvalsOf(e.token, id, "")[0]["status"])
	e.checkChain(id)
}

// temporalCLI runs bin/temporal against the env's dev server.
func (e *env) temporalCLI(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--address", e.temporal.HostPort, "--namespace", "default")
	out, err := exec.CommandContext(ctx, testinfra.TemporalBinary(), args...).CombinedOutput()
	return string(out), err
}

func TestApprovalRejectedWithTheTemporalCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("gate", gateGraph)
	id := e.run("gate", map[string]any{"order": 8})
	e.waitAwaiting(id, "ok")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The operator claims to be alice; weft records who it really is.
	input := `{"nodeId":"ok","decision":"reject","comment":"ops says no","actor":{"kind":"user","sub":"alice"}}`
	out, err := e.temporalCLI(ctx, "workflow", "update", "execute", "--workflow-id", e.getRun(id).Temporal.WorkflowID, "--name", "approve",
		"--input", input)
	require.NoError(t, err, "%s", out)
	require.Contains(t, out, "rejected")

	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	_, _, port, _ := v.node(t, "ok")
	require.Equal(t, "rejected", port)
	status, _, _, _ := v.node(t, "refused")
	require.Equal(t, execution.NodeSucceeded, status)
	decided := e.decidedEvents(id)
	require.Len(t, decided, 1)
	// The evidence says weft's authorization was bypassed, and by whom: the
	// CLI's Temporal client identity (pid@host), not this process's.
	require.Equal(t, execution.ActorOperator, decided[0].Actor.Kind)
	require.Empty(t, decided[0].Actor.Sub, "the actor the operator claimed is not believed")
	require.Regexp(t, `^[0-9]+@`, decided[0].Actor.Identity)
	require.False(t, strings.HasPrefix(decided[0].Actor.Identity, fmt.Sprintf("%d@", os.Getpid())), "the worker's own identity")
	require.Equal(t, "ops says no", decided[0].Comment)
	require.NotEmpty(t, decided[0].UpdateID)
	listed := e.approvalsOf(e.token, id, "rejected")
	require.Len(t, listed, 1)
	require.Equal(t, "operator", listed[0]["actor"].(map[string]any)["kind"])

	// The workflow itself refuses a second decision (the run has ended,
	// so the update finds no workflow to decide anything).
	out, err = e.temporalCLI(ctx, "workflow", "update", "execute", "--workflow-id", e.getRun(id).Temporal.WorkflowID, "--name", "approve",
		"--input", `{"nodeId":"ok","decision":"approve"}`)
	require.Error(t, err, "%s", out)
	require.Len(t, e.decidedEvents(id), 1)
	e.checkChain(id)
}

func TestApprovalTimesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("gate", strings.Replace(gateGraph, `"timeoutMs": 3600000`, `"timeoutMs": 1000`, 1))
	id := e.run("gate", map[string]any{"order": 9})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	_, _, port, _ := v.node(t, "ok")
	require.Equal(t, "timedOut", port)
	require.Contains(t, e.eventTypes(id), "node.approval.timed_out ok")
	require.Empty(t, e.decidedEvents(id))
	require.Equal(t, "timed_out", e.approvalsOf(e.token, id, "")[0]["status"])
	res := e.decide(e.token, id, "ok", map[string]any{"decision": "approve"})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "APPROVAL_NOT_WAITING", res.Code(t))
	e.checkChain(id)
}

func TestApprovalWaitSurvivesAWorkerRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.startWorker()
	e.publish("gate", gateGraph)
	id := e.run("gate", map[string]any{"order": 10})
	e.waitAwaiting(id, "ok")
	w.Stop()
	logged := e.eventTypes(id)

	// No worker answers: the API gives up after its bound with a code.
	start := time.Now()
	res := e.decide(e.token, id, "ok", map[string]any{"decision": "approve", "comment": "while no worker ran"})
	require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	require.Equal(t, "APPROVAL_NOT_DELIVERED", res.Code(t))
	t.Logf("no worker: answered %s after %s", res.Code(t), time.Since(start).Round(time.Millisecond))

	// A new worker picks the run up: nothing was lost or repeated while
	// none ran. The decision is delivered late, or decided again now.
	e.startWorker()
	require.Eventually(t, func() bool {
		if e.nodeState(id, "ok").Approval.Status != execution.ApprovalPending {
			return true
		}
		res := e.decide(e.token, id, "ok", map[string]any{"decision": "approve", "comment": "while no worker ran"})
		return res.Status == http.StatusOK || res.Status == http.StatusConflict
	}, 60*time.Second, 100*time.Millisecond)
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status)
	types := e.eventTypes(id)
	require.Equal(t, logged, types[:len(logged)], "the log before the restart is unchanged")
	require.Equal(t, 1, strings.Count(strings.Join(types, "\n"), "node.approval.requested ok"), "the wait was not asked again")
	decided := e.decidedEvents(id)
	require.Len(t, decided, 1)
	require.Equal(t, "alice", decided[0].Actor.Sub)
	require.Equal(t, execution.ActorUser, decided[0].Actor.Kind)
	e.checkChain(id)
}

func TestApprovalWaitIsCarriedAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	// Temporal suggests continue-as-new from 8 history events on: the run
	// continues while it waits, and the decision reaches the new execution.
	srv := testinfra.OwnTemporalWith(t, "--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=8")
	tc := srv.Client()
	e := newEnvOnServer(t, testinfra.NewDatabase(t), &testinfra.Temporal{Server: srv, HostPort: srv.FrontendHostPort()}, tc)
	e.startWorker()
	e.publish("gate", gateWithFirstStep)
	id := e.run("gate", map[string]any{"order": 11})
	e.waitAwaiting(id, "ok")
	require.Eventually(t, func() bool { return slices.Contains(e.eventTypes(id), "run.continued") },
		30*time.Second, 30*time.Millisecond, "%v", e.eventTypes(id))
	types := e.eventTypes(id)
	require.Less(t, slices.Index(types, "node.approval.requested ok"), slices.Index(types, "run.continued"),
		"the wait began before the run continued as new")

	res := e.decide(e.token, id, "ok", map[string]any{"decision": "approve"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	require.Len(t, e.decidedEvents(id), 1)

	// Two executions: the first continued as new while waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	desc, err := tc.DescribeWorkflow(ctx, e.getRun(id).Temporal.WorkflowID, "")
	require.NoError(t, err)
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	require.NotEqual(t, info.GetExecution().GetRunId(), info.GetFirstRunId())
	e.checkChain(id)
}

// gateWithFirstStep is gateGraph with an echo before the approval, so the
// history passes the lowered suggestion before the wait begins.
var gateWithFirstStep = strings.Replace(strings.Replace(gateGraph,
	`{"from": "in.out", "to": "ok.in"}`, `{"from": "in.out", "to": "first.in"}, {"from": "first.out", "to": "ok.in"}`, 1),
	`{"id": "ok", "kind": "approval"`,
	`{"id": "first", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "ok", "kind": "approval"`, 1)

// writerAgent echoes, then writes a note (a tool that needs approval in
// the workflow's toolset), then answers.
const writerAgent = `{
  "instructions": "File the order.",
  "outputSchema": {"type": "object", "required": ["filed"], "properties": {"filed": {"type": "boolean"}}},
  "allowedTools": ["core.echo@1", "workspace.notes.write@1"],
  "maxTurns": 4, "timeoutMs": 20000,
  "sim": {
    "toolCalls": [
      {"tool": "core.echo@1", "input": {"look": "up"}},
      {"tool": "workspace.notes.write@1", "input": {"title": "Order filed", "body": {"order": 12}}}
    ],
    "output": {"filed": true}
  }
}`

const toolApprovalGraph = `{
  "schemaVersion": 1,
  "toolsets": {"filing": {"tools": ["core.echo@1", "workspace.notes.write@1"], "skill": "File orders.",
    "summary": "Look orders up and file them.", "approval": {"workspace.notes.write@1": "required"}}},
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "writer", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "writer", "revision": 1},
     "tools": "filing"},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "writer.in"}, {"from": "writer.out", "to": "out.in"}]
}`

func TestToolApprovalLive(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.addAgent("writer", writerAgent)
	e.publish("filing", toolApprovalGraph)
	e.startWorker()

	for _, c := range []struct {
		decision string
		tools    []string
		notes    int
	}{
		{"approve", []string{
			"tool.started writer 1 core.echo@1", "tool.completed writer 1 core.echo@1",
			"tool.started writer 2 workspace.notes.write@1", "tool.completed writer 2 workspace.notes.write@1",
		}, 1},
		{"reject", []string{
			"tool.started writer 1 core.echo@1", "tool.completed writer 1 core.echo@1",
			"tool.denied writer 2 workspace.notes.write@1 TOOL_APPROVAL_REJECTED",
		}, 0},
	} {
		t.Run(c.decision, func(t *testing.T) {
			id := e.run("filing", map[string]any{"order": 12})
			e.waitAwaiting(id, "writer")
			// Nothing about the call ran before the decision.
			require.Equal(t, []string{"tool.started writer 1 core.echo@1", "tool.completed writer 1 core.echo@1"}, e.toolEvents(id))
			require.Zero(t, e.notesOf(id))
			pending := e.approvalsOf(e.token, id, "pending")
			require.Len(t, pending, 1)
			require.Equal(t, "tool", pending[0]["kind"])
			call := pending[0]["call"].(map[string]any)
			require.Equal(t, "workspace.notes.write@1", call["tool"])
			require.EqualValues(t, 2, call["ordinal"])
			require.JSONEq(t, `{"title":"Order filed","body":{"order":12}}`, mustJSON(t, call["input"]))

			res := e.decide(e.token, id, "writer", map[string]any{"decision": c.decision})
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			v := e.wait(id, 60*time.Second)
			require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
			require.JSONEq(t, `{"filed":true}`, string(v.Output), "the agent continues either way")
			require.Equal(t, c.tools, e.toolEvents(id))
			require.Equal(t, c.notes, e.notesOf(id), "exactly once when approved, never when rejected")
			_, attempt, _, _ := v.node(t, "writer")
			require.Equal(t, 1, attempt, "resuming spends no attempt")
			e.checkChain(id)
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

func TestSimulatedApprovals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	res := e.do(http.MethodPost, "/v1/workflows", e.token, map[string]any{"key": "gate", "graph": json.RawMessage(gateGraph)})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	bad := e.do(http.MethodPost, "/v1/workflows/gate/runs", e.token, map[string]any{"input": map[string]any{},
		"idempotencyKey": "bad", "mode": "simulation", "draftRevision": 1, "fixtures": map[string]any{"ok": map[string]any{"decision": "maybe"}}})
	require.Equal(t, http.StatusUnprocessableEntity, bad.Status, "%s", bad.Body)

	for _, c := range []struct {
		fixture   string
		port, end string
		virtualMs int64
	}{
		{`{"ok": {"decision": "reject", "durationMs": 90000}}`, "rejected", "refused", 90000},
		{`{"ok": {"decision": "timeout"}}`, "timedOut", "late", 3600000},
		{`{"ok": {"decision": "approve", "durationMs": 7200000}}`, "timedOut", "late", 3600000}, // decided too late
		{`{}`, "approved", "out", 0},
	} {
		res := e.do(http.MethodPost, "/v1/workflows/gate/runs", e.token, map[string]any{"input": map[string]any{"n": 1},
			"idempotencyKey": c.fixture, "mode": "simulation", "draftRevision": 1, "fixtures": json.RawMessage(c.fixture)})
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		id := res.JSON(t)["runId"].(string)
		v := e.wait(id, 30*time.Second)
		require.Equal(t, execution.StatusSucceeded, v.Status, "%s: %v", c.fixture, e.eventTypes(id))
		_, _, port, _ := v.node(t, "ok")
		require.Equal(t, c.port, port, c.fixture)
		status, _, _, _ := v.node(t, c.end)
		require.Equal(t, execution.NodeSucceeded, status, c.fixture)
		// Virtual time covered the wait; nothing waited for real.
		var requested, settled time.Time
		for _, ev := range e.events(id) {
			var d execution.EventData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			switch ev.Type {
			case execution.EventNodeApprovalRequested:
				requested = *d.VirtualAt
			case execution.EventNodeApprovalDecided, execution.EventNodeApprovalTimedOut:
				settled = *d.VirtualAt
				if ev.Type == execution.EventNodeApprovalDecided {
					require.Equal(t, execution.ActorSimulation, d.Actor.Kind)
				}
			}
		}
		require.Equal(t, time.Duration(c.virtualMs)*time.Millisecond, settled.Sub(requested), c.fixture)
	}
}
