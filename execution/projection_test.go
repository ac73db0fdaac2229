package execution_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// A run closed without the interpreter settling its nodes (terminated
// outside weft, then settled by the reconciler) must not show work as
// running: open nodes project as cancelled with RUN_CLOSED.
func TestNodeProjectionClosesOpenNodesOfATerminalRun(t *testing.T) {
	t.Parallel()
	nodes := []graph.Node{
		{ID: "in", Kind: graph.KindInput}, {ID: "a", Kind: graph.KindAction}, {ID: "b", Kind: graph.KindAction},
		{ID: "c", Kind: graph.KindAction}, {ID: "skip", Kind: graph.KindAction}, {ID: "out", Kind: graph.KindOutput},
	}
	ev := func(typ, node string, attempt int, data string) execution.RecordedEvent {
		if data == "" {
			data = "{}"
		}
		return execution.RecordedEvent{Type: typ, NodeID: node, Attempt: attempt, Data: json.RawMessage(data)}
	}
	events := []execution.RecordedEvent{
		ev(execution.EventRunStarted, "", 0, ""),
		ev(execution.EventNodeStarted, "in", 1, ""),
		ev(execution.EventNodeCompleted, "in", 1, `{"port":"out"}`),
		ev(execution.EventNodeStarted, "a", 1, ""), // mid-attempt when the run closed
		ev(execution.EventNodeStarted, "b", 1, ""),
		ev(execution.EventNodeAttemptFailed, "b", 1, ""),
		ev(execution.EventNodeRetryScheduled, "b", 1, ""), // waiting for its retry
		ev(execution.EventNodeStarted, "c", 1, ""),
		ev(execution.EventNodeFailed, "c", 1, `{"error":{"type":"ACTION_FAILED","message":"boom"}}`),
		ev(execution.EventNodeSkipped, "skip", 0, `{"reason":"DEAD_INPUT"}`),
		ev(execution.EventRunFailed, "", 0, `{"reason":"TERMINATED_OUTSIDE_WEFT"}`),
	}
	project := func(status string) map[string]execution.NodeState {
		p := execution.NewNodeProjection(nodes)
		for _, e := range events {
			p.Apply(e)
		}
		out := map[string]execution.NodeState{}
		var order []string
		for _, st := range p.States(status) {
			out[st.ID] = st
			order = append(order, st.ID)
		}
		require.Equal(t, []string{"in", "a", "b", "c", "skip", "out"}, order, "compiled order")
		return out
	}

	// While the run is open the events speak as they are.
	open := project(execution.StatusRunning)
	require.Equal(t, execution.NodeRunning, open["a"].Status)
	require.Equal(t, execution.NodeWaiting, open["b"].Status)
	require.Equal(t, execution.NodePending, open["out"].Status)

	for _, status := range []string{execution.StatusFailed, execution.StatusCancelled, execution.StatusSucceeded} {
		got := project(status)
		require.Equal(t, execution.NodeState{ID: "in", Kind: "input", Status: execution.NodeSucceeded, Attempt: 1, Port: "out"}, got["in"], status)
		require.Equal(t, execution.NodeState{ID: "a", Kind: "action", Status: execution.NodeCancelled, Attempt: 1, Reason: execution.ReasonRunClosed}, got["a"], status)
		require.Equal(t, execution.NodeState{ID: "b", Kind: "action", Status: execution.NodeCancelled, Attempt: 1, Reason: execution.ReasonRunClosed}, got["b"], status)
		require.Equal(t, execution.NodeState{ID: "c", Kind: "action", Status: execution.NodeFailed, Attempt: 1, Reason: "ACTION_FAILED", Error: "boom"}, got["c"], status)
		require.Equal(t, execution.NodeState{ID: "skip", Kind: "action", Status: execution.NodeSkipped, Reason: "DEAD_INPUT"}, got["skip"], status)
		require.Equal(t, execution.NodeState{ID: "out", Kind: "output", Status: execution.NodeCancelled, Reason: execution.ReasonRunClosed}, got["out"], status)
	}
	queued := project(execution.StatusQueued)
	require.Equal(t, execution.NodeRunning, queued["a"].Status, "only a terminal run closes its nodes")
}

// A node whose attempt was lost to an infrastructure fault keeps running
// (the same attempt goes out again) and shows how it was recovered.
func TestNodeProjectionShowsRecoveredAttempts(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	events := []execution.RecordedEvent{
		{Type: execution.EventNodeStarted, NodeID: "a", Attempt: 1, Data: json.RawMessage(`{}`)},
		{Type: execution.EventNodeAttemptLeaseLost, NodeID: "a", Attempt: 1, At: at,
			Data: json.RawMessage(`{"attempt":1,"code":"LEASE_LOST","redispatch":1,"delayMs":250}`)},
		{Type: execution.EventNodeAttemptInfraRetry, NodeID: "a", Attempt: 1, At: at.Add(time.Second),
			Data: json.RawMessage(`{"attempt":1,"code":"STORE_UNAVAILABLE","redispatch":2,"delayMs":500}`)},
	}
	p := execution.NewNodeProjection([]graph.Node{{ID: "a", Kind: graph.KindAction}})
	for _, e := range events[:2] {
		p.Apply(e)
	}
	lost := p.States(execution.StatusRunning)[0]
	require.Equal(t, execution.NodeRunning, lost.Status)
	require.Equal(t, 1, lost.Attempt)
	require.Equal(t, 1, lost.Redispatches)
	require.Equal(t, execution.InfraLeaseLost, lost.Infra)
	require.Equal(t, at, *lost.InfraSince)

	p.Apply(events[2])
	p.Apply(execution.RecordedEvent{Type: execution.EventNodeCompleted, NodeID: "a", Attempt: 1, Data: json.RawMessage(`{"port":"out"}`)})
	done := p.States(execution.StatusSucceeded)[0]
	require.Equal(t, execution.NodeState{ID: "a", Kind: "action", Status: execution.NodeSucceeded, Attempt: 1, Port: "out",
		Redispatches: 2, Infra: execution.ErrStoreUnavailable, InfraSince: &at}, done)
}

// Approval events project like the interpreter's own state: waiting, then
// decided with who decided, and a wait the run's end closed shows cancelled.
func TestNodeProjectionOfApprovals(t *testing.T) {
	t.Parallel()
	nodes := []graph.Node{{ID: "in", Kind: graph.KindInput}, {ID: "ok", Kind: graph.KindApproval}, {ID: "ag", Kind: graph.KindAgent}}
	deadline := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ev := func(typ, node string, data any) execution.RecordedEvent {
		raw, _ := json.Marshal(data)
		return execution.RecordedEvent{Type: typ, NodeID: node, Attempt: 1, At: deadline.Add(-time.Hour), Data: raw}
	}
	alice := &execution.Actor{Kind: execution.ActorUser, Sub: "alice"}
	call := &execution.ApprovalCall{Ordinal: 1, Tool: "workspace.notes.write@1"}
	p := execution.NewNodeProjection(nodes)
	for _, e := range []execution.RecordedEvent{
		ev(execution.EventNodeStarted, "ok", execution.EventData{}),
		ev(execution.EventNodeApprovalRequested, "ok", execution.EventData{Request: 1, TimeoutMs: 3_600_000, DeadlineAt: &deadline}),
		ev(execution.EventNodeStarted, "ag", execution.EventData{}),
		ev(execution.EventNodeApprovalRequested, "ag", execution.EventData{Request: 1, TimeoutMs: 60_000, Call: call}),
		ev(execution.EventNodeApprovalDecided, "ag", execution.EventData{Request: 1, Decision: execution.DecisionApprove, Actor: alice, Comment: "go"}),
	} {
		p.Apply(e)
	}
	states := p.States(execution.StatusRunning)
	ok, ag := states[1], states[2]
	require.Equal(t, execution.NodeAwaitingApproval, ok.Status)
	require.Equal(t, &execution.ApprovalState{Request: 1, Status: execution.ApprovalPending, TimeoutMs: 3_600_000,
		RequestedAt: deadline.Add(-time.Hour), DeadlineAt: &deadline}, ok.Approval)
	require.Equal(t, execution.NodeRunning, ag.Status, "resumes after the decision")
	require.Equal(t, execution.ApprovalApproved, ag.Approval.Status)
	require.Equal(t, alice, ag.Approval.Actor)
	require.Equal(t, call, ag.Approval.Call)

	closed := p.States(execution.StatusCancelled)[1]
	require.Equal(t, execution.NodeCancelled, closed.Status)
	require.Equal(t, execution.ApprovalCancelled, closed.Approval.Status)
	require.Equal(t, execution.ApprovalPending, states[1].Approval.Status, "closing a copy")
}
