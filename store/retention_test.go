package store_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// closedRun creates a run of tenant keyed idem with an event, a
// transcript, a claim-checked value, a recorded node result, two ledger entries (an agent tool
// call's and an action node's) and a note, and settles it as finished at.
func closedRun(t *testing.T, st *store.Store, tenant, idem string, finished time.Time) store.Run {
	t.Helper()
	ctx := context.Background()
	r, created, err := st.CreateRun(ctx, newRunValue(tenant, "wf", idem), idem)
	require.NoError(t, err, "create run")
	require.True(t, created, "create run: %v", err)
	require.NoError(t, st.AppendEvents(ctx, tenant, r.RunID, []execution.EventDraft{draft("a", "run.started", "")}, nil))
	require.NoError(t, st.SaveAgentTranscript(ctx, store.AgentTranscript{TenantID: tenant, RunID: r.RunID, NodeID: "agent",
		AgentKey: "a", AgentRevision: 1, Attempt: 1, Transcript: json.RawMessage(`{}`)}, nil))
	_, err = st.PutValue(ctx, tenant, r.RunID, "n", "out", json.RawMessage(`{"big":true}`))
	require.NoError(t, err)
	require.NoError(t, st.PutNodeResult(ctx, tenant, r.RunID, "n", 1, 0, "out", json.RawMessage(`{"mid":true}`), 12))
	agentKey := url.PathEscape(r.RunID) + "/agent/1"
	_, err = st.LedgerRecord(ctx, tenant, "test.write@1", agentKey, "ih", json.RawMessage(`{"ok":1}`))
	require.NoError(t, err)
	actionKey := url.PathEscape(tenant) + "/" + url.PathEscape(r.RunID) + "/save"
	_, err = st.WriteNoteOnce(ctx, tenant, r.RunID, "save", actionKey, "ih2", "kept", json.RawMessage(`{}`),
		execution.Actor{Kind: "user", Sub: "ada"})
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, tenant, r.RunID, []execution.EventDraft{draft("z", "run.succeeded", "")},
		&execution.RunUpdate{Status: execution.StatusSucceeded}))
	_, err = st.Pool.Exec(ctx, `UPDATE runs SET finished_at = $2 WHERE run_id = $1`, r.RunID, finished)
	require.NoError(t, err)
	return r
}

func count(t *testing.T, st *store.Store, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestDeleteRunsClosedBeforeKeepsTheBinding(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	now := time.Now()
	oldFinish := now.Add(-40 * 24 * time.Hour)
	oldKey := "old-" + uuid.NewString()
	old := closedRun(t, st, "t1", oldKey, oldFinish)
	recent := closedRun(t, st, "t1", "recent-"+uuid.NewString(), now.Add(-time.Hour))
	// The same keys in another tenant, and a run still open.
	foreign := closedRun(t, st, "t2", oldKey, now.Add(-time.Hour))
	open := createRun(t, st, "t1")

	res, err := st.DeleteRunsClosedBefore(ctx, now.Add(-30*24*time.Hour))
	require.NoError(t, err)
	require.True(t, res == (store.RetentionResult{Runs: 1, Events: 2, Transcripts: 1, Values: 1, NodeResults: 1, LedgerEntries: 2}), "deleted %+v", res)
	_, err = st.GetRun(ctx, "t1", old.RunID)
	require.ErrorIs(t, err, failure.ErrNotFound, "old run still there: %v", err)
	for _, r := range []store.Run{recent, open} {
		_, err = st.GetRun(ctx, "t1", r.RunID)
		require.NoError(t, err, "run %s deleted", r.RunID)
	}
	_, err = st.GetRun(ctx, "t2", foreign.RunID)
	require.NoError(t, err)
	for table, n := range map[string]int{"agent_transcripts": 0, "run_values": 0, "node_results": 0} {
		got := count(t, st, `SELECT count(*) FROM `+table+` WHERE run_id = $1`, old.RunID)
		require.Equal(t, n, got, "%s rows of the deleted run: %d", table, got)
	}
	// Ledger entries of the other runs are untouched; notes (the tenant's
	// workspace) stay.
	got := count(t, st, `SELECT count(*) FROM action_ledger`)
	require.Equal(t, 4, got, "%d ledger entries left, want 4 (2 runs x 2)", got)
	got = count(t, st, `SELECT count(*) FROM notes WHERE run_id = $1`, old.RunID)
	require.Equal(t, 1, got, "the deleted run's note: %d", got)

	// The binding outlives the run: the key cannot start another run.
	got = count(t, st, `SELECT count(*) FROM idempotency_bindings WHERE run_id = $1 AND run_deleted_at IS NOT NULL
		AND run_finished_at = $2`, old.RunID, oldFinish)
	require.Equal(t, 1, got, "binding of the deleted run: %d", got)
	_, ok, err := st.BoundRun(ctx, "t1", "wf", oldKey)
	require.NoError(t, err, "bound run of a deleted run: ok=%v err", ok)
	require.False(t, ok, "bound run of a deleted run: ok=%v err=%v", ok, err)
	_, _, err = st.CreateRun(ctx, newRunValue("t1", "wf", oldKey), oldKey)
	require.Equal(t, store.CodeRunDeleted, failure.CodeOf(err), "reused key: %v", err)
	var fe *failure.Error
	require.ErrorAs(t, err, &fe, "details %+v", fe)
	require.True(t, fe.Details["runId"] == old.RunID, "details %+v", fe)

	// A second pass deletes nothing more.
	res, err = st.DeleteRunsClosedBefore(ctx, now.Add(-30*24*time.Hour))
	require.NoError(t, err, "second pass %+v", res)
	require.Equal(t, int64(0), res.Runs, "second pass %+v %v", res, err)

	// Bindings go once their run finished before the cutoff the worker
	// computes from the namespace's retention; then the key is free.
	n, err := st.DeleteExpiredBindings(ctx, oldFinish)
	require.NoError(t, err, "expired before the finish: %d", n)
	require.Equal(t, int64(0), n, "expired before the finish: %d %v", n, err)
	n, err = st.DeleteExpiredBindings(ctx, oldFinish.Add(time.Second))
	require.NoError(t, err, "expired bindings: %d", n)
	require.Equal(t, int64(1), n, "expired bindings: %d %v", n, err)
	again, created, err := st.CreateRun(ctx, newRunValue("t1", "wf", oldKey), oldKey)
	require.NoError(t, err, "key after its binding expired: %+v %v", again, created)
	require.True(t, created, "key after its binding expired: %+v %v %v", again, created, err)
	require.NotEqual(t, old.RunID, again.RunID, "key after its binding expired: %+v %v %v", again, created, err)
	// Bindings of live runs are never expired.
	got = count(t, st, `SELECT count(*) FROM idempotency_bindings WHERE tenant_id = 't1'`)
	require.Equal(t, 3, got, "%d bindings of t1", got)
}

func TestCheckChainReportsTheFirstBreak(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("a", "x.y", `{"n":1}`), draft("b", "x.y", `{"n":2}`), draft("c", "x.y", `{"n":3}`), draft("d", "x.y", `{"n":4}`),
	}, nil))
	rep, err := st.CheckChain(ctx, "t1", run.RunID)
	require.NoError(t, err, "intact chain: %+v", rep)
	require.True(t, rep == (store.ChainReport{Intact: true, Events: 4}), "intact chain: %+v %v", rep, err)
	_, err = st.CheckChain(ctx, "t2", run.RunID)
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant's run: %v", err)
	_, err = st.Pool.Exec(ctx, `UPDATE run_events SET data = '{"n":20}' WHERE run_id = $1 AND seq = 2`, run.RunID)
	require.NoError(t, err)
	rep, err = st.CheckChain(ctx, "t1", run.RunID)
	require.NoError(t, err, "edited chain: %+v", rep)
	require.False(t, rep.Intact, "edited chain: %+v %v", rep, err)
	require.Equal(t, int64(2), rep.FirstBrokenSeq, "edited chain: %+v %v", rep, err)
	require.Equal(t, int64(4), rep.Events, "edited chain: %+v %v", rep, err)
	require.NotEmpty(t, rep.Reason, "edited chain: %+v %v", rep, err)
}

func TestScheduleFiringInputFirstOneWins(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	_, found, err := st.ScheduleFiringInput(ctx, "t1", "sch_a", "k")
	require.NoError(t, err, "before: %v", found)
	require.False(t, found, "before: %v %v", found, err)
	got, err := st.SaveScheduleFiringInput(ctx, "t1", "sch_a", "k", json.RawMessage(`{"name":"first"}`))
	require.NoError(t, err, "first save: %s", got)
	require.Equal(t, `{"name": "first"}`, string(got), "first save: %s %v", got, err)
	// A second execution of the same firing gets the stored input back.
	got, err = st.SaveScheduleFiringInput(ctx, "t1", "sch_a", "k", json.RawMessage(`{"name":"second"}`))
	require.NoError(t, err, "second save: %s", got)
	require.Equal(t, `{"name": "first"}`, string(got), "second save: %s %v", got, err)
	in, found, err := st.ScheduleFiringInput(ctx, "t1", "sch_a", "k")
	require.NoError(t, err, "read: %s %v", in, found)
	require.True(t, found, "read: %s %v %v", in, found, err)
	require.Equal(t, `{"name": "first"}`, string(in), "read: %s %v %v", in, found, err)
	_, found, _ = st.ScheduleFiringInput(ctx, "t2", "sch_a", "k")
	require.False(t, found, "another tenant reads the firing")
	n, err := st.DeleteScheduleFiringsBefore(ctx, time.Now().Add(-time.Hour))
	require.NoError(t, err, "prune recent: %d", n)
	require.Equal(t, int64(0), n, "prune recent: %d %v", n, err)
	n, err = st.DeleteScheduleFiringsBefore(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err, "prune: %d", n)
	require.Equal(t, int64(1), n, "prune: %d %v", n, err)
}
