package agents_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// approvalJob is an attempt whose toolset requires approval for test.write@1.
func (h *harness) approvalJob(t *testing.T) (agents.Job, *agents.Runtime) {
	t.Helper()
	a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m",
		AllowedTools: []string{"core.echo@1", "test.write@1"}})
	h.prov.turns = []provider.Reply{
		calls(call("c1", "core_echo_v1", `{"x":1}`), call("c2", "test_write_v1", `{"n":7}`)),
		final(`{"done":true}`),
	}
	job := h.job(a, "crm.write")
	job.Toolset = &graph.Toolset{Tools: []string{"core.echo@1", "test.write@1"}, Skill: "s",
		Approval: map[string]string{"test.write@1": graph.ApprovalRequired}, ApprovalTimeoutMs: 90_000}
	return job, h.runtime()
}

// decided is the decision the interpreter passes to the resumed attempt.
func decided(status string, ordinal int, tool string) *execution.ApprovalState {
	at := time.Now()
	return &execution.ApprovalState{Request: 1, Status: status, TimeoutMs: 90_000, DecidedAt: &at,
		Actor: &execution.Actor{Kind: execution.ActorUser, Sub: "bob"}, Comment: "checked",
		Call: &execution.ApprovalCall{Ordinal: ordinal, Tool: tool}}
}

func TestToolApprovalStopsBeforeTheCallAndApproveRunsItOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	job, rt := h.approvalJob(t)

	res, err := rt.Run(context.Background(), job)
	require.NoError(t, err)
	require.Nil(t, res.Output)
	require.NotNil(t, res.Approval)
	require.Equal(t, execution.ApprovalCall{Ordinal: 2, Turn: 1, Tool: "test.write@1", Input: json.RawMessage(`{"n":7}`), InputBytes: 7},
		res.Approval.Call)
	require.EqualValues(t, 90_000, res.Approval.TimeoutMs)
	// The call before it ran; nothing about the call needing approval did.
	require.Equal(t, []string{"tool.started 1 core.echo@1", "tool.completed 1 core.echo@1"}, h.toolEvents())
	require.Zero(t, h.writes.Load())
	require.Equal(t, agents.CallPending, h.transcript().Calls[1].Status, "the checkpoint holds the call pending")

	// A resumption without the decision (a re-dispatch, or a decision for
	// another call) asks again and runs nothing.
	job.Approval = decided(execution.ApprovalApproved, 1, "test.write@1")
	res, err = rt.Run(context.Background(), job)
	require.NoError(t, err)
	require.NotNil(t, res.Approval)
	require.Zero(t, h.writes.Load())

	job.Approval = decided(execution.ApprovalApproved, 2, "test.write@1")
	res, err = rt.Run(context.Background(), job)
	require.NoError(t, err)
	require.Nil(t, res.Approval)
	require.JSONEq(t, `{"done":true}`, string(res.Output))
	require.EqualValues(t, 1, h.writes.Load())
	require.Len(t, h.prov.reqs, 2, "the model was asked once before and once after the decision")

	// The same decision again (the attempt dispatched once more): the call
	// is settled in the transcript and never runs twice.
	res, err = rt.Run(context.Background(), job)
	require.NoError(t, err)
	require.JSONEq(t, `{"done":true}`, string(res.Output))
	require.EqualValues(t, 1, h.writes.Load())
	require.Equal(t, []string{
		"tool.started 1 core.echo@1", "tool.completed 1 core.echo@1",
		"tool.started 2 test.write@1", "tool.completed 2 test.write@1",
	}, h.toolEvents())
}

func TestToolApprovalRejectedOrTimedOutIsDenied(t *testing.T) {
	t.Parallel()
	for status, reason := range map[string]string{
		execution.ApprovalRejected: agents.ReasonApprovalRejected,
		execution.ApprovalTimedOut: agents.ReasonApprovalTimedOut,
	} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			job, rt := h.approvalJob(t)
			res, err := rt.Run(context.Background(), job)
			require.NoError(t, err)
			require.NotNil(t, res.Approval)

			job.Approval = decided(status, 2, "test.write@1")
			res, err = rt.Run(context.Background(), job)
			require.NoError(t, err)
			require.JSONEq(t, `{"done":true}`, string(res.Output), "the agent continues after the denial")
			require.Zero(t, h.writes.Load(), "nothing written: %v", h.toolEvents())
			require.Equal(t, []string{
				"tool.started 1 core.echo@1", "tool.completed 1 core.echo@1", "tool.denied 2 test.write@1 " + reason,
			}, h.toolEvents())
			d := h.eventData(execution.EventToolDenied, 2)
			require.EqualValues(t, 1, d["request"])
			require.Equal(t, "bob", d["decidedBy"].(map[string]any)["sub"])
			tr := h.transcript()
			require.Equal(t, agents.CallDenied, tr.Calls[1].Status)
			require.Contains(t, tr.Messages[4].Content, reason, "the model sees the denial")
			_, found, err := h.st.LedgerLookup(context.Background(), h.tenant, "test.write@1", agents.LedgerKey(h.run, "triage", 2), "any")
			require.NoError(t, err, "no ledger entry (another input's would conflict)")
			require.False(t, found, "no ledger entry for a call that never ran")
		})
	}
}

func TestToolsNeedingApprovalSayItWhenOffered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	job, rt := h.approvalJob(t)
	_, err := rt.Run(context.Background(), job)
	require.NoError(t, err)
	for _, tl := range h.prov.reqs[0].Tools {
		if tl.Ref == "test.write@1" {
			require.Contains(t, tl.Description, "waits for a person's approval")
		} else {
			require.NotContains(t, tl.Description, "approval")
		}
	}
}
