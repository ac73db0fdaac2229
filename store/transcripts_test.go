package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func newRun(t *testing.T, st *store.Store, tenant string) string { return newRunTB(t, st, tenant) }

func newRunTB(t testing.TB, st *store.Store, tenant string) string {
	t.Helper()
	id := uuid.NewString()
	_, _, err := st.CreateRun(context.Background(), store.Run{RunID: id, TenantID: tenant, WorkflowKey: "wf", Checksum: "c",
		Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + id}, "idem-"+id)
	require.NoError(t, err)
	return id
}

func TestAgentTranscriptsFenceAttemptsAndUsageAddsUp(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := newRun(t, st, "t1")
	_, err := st.GetAgentTranscript(ctx, "t1", run, "triage")
	require.ErrorIs(t, err, failure.ErrNotFound)

	outbox := []execution.EventDraft{{Key: run + "/triage/2/agent.turn/1", Type: "agent.turn", NodeID: "triage", Attempt: 2,
		At: mustTime(t), Data: json.RawMessage(`{"turn":1}`)}}
	tr := store.AgentTranscript{TenantID: "t1", RunID: run, NodeID: "triage", AgentKey: "triage", AgentRevision: 1,
		Attempt: 2, Turn: 1, Transcript: json.RawMessage(`{"v":1}`), LedgerKeys: []string{"k1"}, Outbox: outbox}
	require.NoError(t, st.SaveAgentTranscript(ctx, tr, &store.Usage{Calls: 1, InputTokens: 10, OutputTokens: 5, CostUSD: 0.1}))
	require.NoError(t, st.SaveAgentTranscript(ctx, tr, &store.Usage{Calls: 1, InputTokens: 1, OutputTokens: 2, CostUSD: 0.2}))

	got, err := st.GetAgentTranscript(ctx, "t1", run, "triage")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1}`, string(got.Transcript))
	require.Equal(t, []string{"k1"}, got.LedgerKeys)
	require.Len(t, got.Outbox, 1)
	require.Equal(t, outbox[0].Key, got.Outbox[0].Key)

	stale := tr
	stale.Attempt = 1
	stale.Transcript = json.RawMessage(`{"v":0}`)
	err = st.SaveAgentTranscript(ctx, stale, &store.Usage{Calls: 1, InputTokens: 1000})
	require.Equal(t, store.CodeStaleAttempt, failure.CodeOf(err))
	got, err = st.GetAgentTranscript(ctx, "t1", run, "triage")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1}`, string(got.Transcript), "a stale attempt changes nothing")

	r, err := st.GetRun(ctx, "t1", run)
	require.NoError(t, err)
	require.JSONEq(t, `{"calls":2,"inputTokens":11,"outputTokens":7,"totalTokens":18,"costUsd":0.3}`, string(r.Usage),
		"the stale save added no usage; the cost sum is exact")
	require.ErrorIs(t, st.AddUsage(ctx, "t2", run, store.Usage{Calls: 1}), failure.ErrNotFound, "another tenant's run")
}

// An attempt re-dispatched after a lost lease keeps its attempt number; a
// save from its earlier dispatch (a worker presumed lost but still
// running) is stale once the later dispatch has saved.
func TestAgentTranscriptsFenceDispatchesOfOneAttempt(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := newRun(t, st, "t1")
	tr := store.AgentTranscript{TenantID: "t1", RunID: run, NodeID: "n", AgentKey: "a", AgentRevision: 1,
		Attempt: 1, Turn: 1, Transcript: json.RawMessage(`{"v":"first dispatch"}`)}
	require.NoError(t, st.SaveAgentTranscript(ctx, tr, nil))
	later := tr
	later.Dispatch, later.Transcript = 1, json.RawMessage(`{"v":"re-dispatched"}`)
	require.NoError(t, st.SaveAgentTranscript(ctx, later, nil))

	zombie := tr
	zombie.Turn, zombie.Transcript = 2, json.RawMessage(`{"v":"zombie"}`)
	require.Equal(t, store.CodeStaleAttempt, failure.CodeOf(st.SaveAgentTranscript(ctx, zombie, nil)))
	got, err := st.GetAgentTranscript(ctx, "t1", run, "n")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":"re-dispatched"}`, string(got.Transcript))

	next := tr
	next.Attempt, next.Transcript = 2, json.RawMessage(`{"v":"next attempt"}`)
	require.NoError(t, st.SaveAgentTranscript(ctx, next, nil), "a later attempt outranks any dispatch of an earlier one")
}

func mustTime(t *testing.T) time.Time {
	t.Helper()
	return time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
}
