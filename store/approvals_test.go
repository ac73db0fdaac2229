package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func approvalEvent(key, typ, node string, data any) execution.EventDraft {
	raw, _ := json.Marshal(data)
	return execution.EventDraft{Key: key, Type: typ, NodeID: node, Attempt: 1, At: time.Now().UTC(), Data: raw}
}

func TestApprovalsAreProjectedFromTheLog(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	other := createRun(t, st, "t1")
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	call := &execution.ApprovalCall{Ordinal: 2, Tool: "workspace.notes.write@1", Input: json.RawMessage(`{"title":"x","apiKey":"s3cret"}`), InputBytes: 30}
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		approvalEvent("r1", execution.EventNodeApprovalRequested, "ok", execution.EventData{Request: 1, TimeoutMs: 3_600_000, DeadlineAt: &deadline}),
		approvalEvent("r2", execution.EventNodeApprovalRequested, "ag", execution.EventData{Request: 1, TimeoutMs: 60_000, Call: call}),
	}, nil))
	require.NoError(t, st.AppendEvents(ctx, "t1", other.RunID, []execution.EventDraft{
		approvalEvent("o1", execution.EventNodeApprovalRequested, "ok", execution.EventData{Request: 1, TimeoutMs: 1000}),
	}, nil))

	pending, err := st.ListApprovals(ctx, "t1", store.ApprovalFilter{Status: execution.ApprovalPending})
	require.NoError(t, err)
	require.Len(t, pending, 3)
	ok, err := st.LatestApproval(ctx, "t1", run.RunID, "ok")
	require.NoError(t, err)
	require.Equal(t, execution.ApprovalPending, ok.Status)
	require.EqualValues(t, 3_600_000, ok.TimeoutMs)
	require.True(t, deadline.Equal(*ok.DeadlineAt))
	require.Equal(t, "wf", ok.WorkflowKey)
	ag, err := st.LatestApproval(ctx, "t1", run.RunID, "ag")
	require.NoError(t, err)
	require.Equal(t, "workspace.notes.write@1", ag.Call.Tool)
	require.JSONEq(t, `{"title":"x","apiKey":"[REDACTED]"}`, string(ag.Call.Input), "redacted like any evidence")

	// Decided, timed out, and a wait cancelled with its run.
	alice := execution.Actor{Kind: execution.ActorUser, Sub: "alice"}
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		approvalEvent("r3", execution.EventNodeApprovalDecided, "ok", execution.EventData{Request: 1, Decision: execution.DecisionReject, Actor: &alice, Comment: "no"}),
		approvalEvent("r4", execution.EventNodeApprovalTimedOut, "ag", execution.EventData{Request: 1, TimeoutMs: 60_000}),
		approvalEvent("r5", execution.EventNodeApprovalRequested, "ag", execution.EventData{Request: 2, TimeoutMs: 60_000, Call: call}),
	}, nil))
	require.NoError(t, st.AppendEvents(ctx, "t1", other.RunID, []execution.EventDraft{
		approvalEvent("o2", execution.EventRunCancelled, "", execution.EventData{}),
	}, &execution.RunUpdate{Status: execution.StatusCancelled}))

	ok, err = st.LatestApproval(ctx, "t1", run.RunID, "ok")
	require.NoError(t, err)
	require.Equal(t, execution.ApprovalRejected, ok.Status)
	require.Equal(t, &alice, ok.Actor)
	require.Equal(t, "no", ok.Comment)
	require.NotNil(t, ok.DecidedAt)
	ag, err = st.LatestApproval(ctx, "t1", run.RunID, "ag")
	require.NoError(t, err)
	require.Equal(t, 2, ag.Request)
	require.Equal(t, execution.ApprovalPending, ag.Status)

	pending, err = st.ListApprovals(ctx, "t1", store.ApprovalFilter{Status: execution.ApprovalPending})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, "ag", pending[0].NodeID)
	all, err := st.ListApprovals(ctx, "t1", store.ApprovalFilter{})
	require.NoError(t, err)
	statuses := map[string]int{}
	for _, a := range all {
		statuses[a.Status]++
	}
	require.Equal(t, map[string]int{"pending": 1, "rejected": 1, "timed_out": 1, "cancelled": 1}, statuses)
	// Pages follow the keyset.
	page, err := st.ListApprovals(ctx, "t1", store.ApprovalFilter{Limit: 2})
	require.NoError(t, err)
	last := page[1]
	rest, err := st.ListApprovals(ctx, "t1", store.ApprovalFilter{Before: &store.ApprovalCursor{
		RequestedAt: last.RequestedAt, RunID: last.RunID, NodeID: last.NodeID, Request: last.Request}})
	require.NoError(t, err)
	require.Len(t, rest, 2)

	// Another tenant sees nothing.
	none, err := st.ListApprovals(ctx, "t2", store.ApprovalFilter{})
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = st.LatestApproval(ctx, "t2", run.RunID, "ok")
	require.True(t, errors.Is(err, failure.ErrNotFound))
}

func TestApprovalDecisionsAreBoundToTheirRun(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	d := store.ApprovalDecision{DecisionID: "d1", TenantID: "t1", RunID: run.RunID, NodeID: "ok", Request: 1,
		Decision: execution.DecisionApprove, Actor: execution.Actor{Kind: "user", Sub: "alice"}, Comment: "fine"}
	require.NoError(t, st.PutApprovalDecision(ctx, d))
	got, err := st.GetApprovalDecision(ctx, "t1", run.RunID, "d1")
	require.NoError(t, err)
	require.Equal(t, "alice", got.Actor.Sub)
	require.Equal(t, "fine", got.Comment)
	_, err = st.GetApprovalDecision(ctx, "t2", run.RunID, "d1")
	require.True(t, errors.Is(err, failure.ErrNotFound))

	foreign := d
	foreign.DecisionID, foreign.TenantID = "d2", "t2"
	require.True(t, errors.Is(st.PutApprovalDecision(ctx, foreign), failure.ErrNotFound), "another tenant's run")

	require.NoError(t, st.DeleteApprovalDecision(ctx, "t1", "d1"))
	_, err = st.GetApprovalDecision(ctx, "t1", run.RunID, "d1")
	require.True(t, errors.Is(err, failure.ErrNotFound))
}
