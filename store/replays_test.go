package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// finishRun moves a run to status, finished at.
func finishRun(t *testing.T, st *store.Store, runID, status string, at time.Time) {
	t.Helper()
	_, err := st.Pool.Exec(context.Background(), `UPDATE runs SET status = $2, finished_at = $3 WHERE run_id = $1`, runID, status, at)
	require.NoError(t, err)
}

func newReplay(tenant string) store.Replay {
	return store.Replay{ReplayID: "rpl_" + uuid.NewString(), TenantID: tenant, TenantName: "Acme", WorkflowKey: "wf",
		DraftRevision: 3, Actor: execution.Actor{Kind: "user", Sub: "ada"}, Permissions: []string{"runs.execute"},
		Fixtures: json.RawMessage(`{"n":[{"output":1}]}`)}
}

func TestReplayRowsAndVerdicts(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	r, err := st.CreateReplay(ctx, newReplay("t1"), []string{"run-b", "run-a"})
	require.NoError(t, err)
	require.Equal(t, store.ReplayRunning, r.Status)

	got, runs, err := st.GetReplay(ctx, "t1", r.ReplayID)
	require.NoError(t, err)
	assert.Equal(t, "wf", got.WorkflowKey)
	assert.Equal(t, 3, got.DraftRevision)
	assert.Equal(t, "Acme", got.TenantName)
	assert.Equal(t, "ada", got.Actor.Sub)
	assert.Equal(t, []string{"runs.execute"}, got.Permissions)
	assert.JSONEq(t, `{"n":[{"output":1}]}`, string(got.Fixtures))
	require.Len(t, runs, 2)
	assert.Equal(t, "run-b", runs[0].RunID, "runs keep the order they were chosen in")
	assert.Equal(t, "", runs[0].Verdict, "pending")

	// Another tenant sees nothing, and writes nothing.
	_, _, err = st.GetReplay(ctx, "t2", r.ReplayID)
	require.ErrorIs(t, err, failure.ErrNotFound)
	require.ErrorIs(t, st.SetReplayVerdict(ctx, "t2", r.ReplayID, store.ReplayRun{RunID: "run-a", Verdict: "same"}), failure.ErrNotFound)
	require.ErrorIs(t, st.FinishReplay(ctx, "t2", r.ReplayID), failure.ErrNotFound)

	require.NoError(t, st.SetReplaySimulation(ctx, "t1", r.ReplayID, "run-a", "sim-1"))
	require.NoError(t, st.SetReplayVerdict(ctx, "t1", r.ReplayID, store.ReplayRun{RunID: "run-a", Verdict: "path-changed",
		SimulationRunID: "sim-1", RecordedStatus: "succeeded", SimulatedStatus: "succeeded",
		Diff: json.RawMessage(`{"nodes":[{"nodeId":"g","recorded":"succeeded","simulated":"skipped"}]}`)}))
	_, runs, err = st.GetReplay(ctx, "t1", r.ReplayID)
	require.NoError(t, err)
	a := runs[1]
	assert.Equal(t, "path-changed", a.Verdict)
	assert.Equal(t, "sim-1", a.SimulationRunID)
	assert.JSONEq(t, `{"nodes":[{"nodeId":"g","recorded":"succeeded","simulated":"skipped"}]}`, string(a.Diff))
	assert.NotNil(t, a.FinishedAt)

	// An unknown verdict is refused by the table.
	require.Error(t, st.SetReplayVerdict(ctx, "t1", r.ReplayID, store.ReplayRun{RunID: "run-b", Verdict: "maybe"}))

	require.NoError(t, st.FinishReplay(ctx, "t1", r.ReplayID))
	got, _, err = st.GetReplay(ctx, "t1", r.ReplayID)
	require.NoError(t, err)
	assert.Equal(t, store.ReplayDone, got.Status)
	require.NotNil(t, got.FinishedAt)

	list, sums, err := st.ListReplays(ctx, "t1", "wf", nil, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, store.ReplaySummary{"path-changed": 1, "": 1}, sums[0])
	list, _, err = st.ListReplays(ctx, "t2", "wf", nil, 10)
	require.NoError(t, err)
	assert.Empty(t, list)

	require.NoError(t, st.DeleteReplay(ctx, "t1", r.ReplayID))
	_, _, err = st.GetReplay(ctx, "t1", r.ReplayID)
	require.ErrorIs(t, err, failure.ErrNotFound)
}

func TestListReplaysPages(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		r, err := st.CreateReplay(ctx, newReplay("t1"), nil)
		require.NoError(t, err)
		ids = append(ids, r.ReplayID)
	}
	first, _, err := st.ListReplays(ctx, "t1", "wf", nil, 2)
	require.NoError(t, err)
	require.Len(t, first, 2)
	c := first[1].Cursor()
	rest, _, err := st.ListReplays(ctx, "t1", "wf", &c, 2)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	seen := map[string]bool{first[0].ReplayID: true, first[1].ReplayID: true, rest[0].ReplayID: true}
	for _, id := range ids {
		assert.True(t, seen[id], "replay %s listed once", id)
	}
	assert.False(t, first[0].CreatedAt.Before(first[1].CreatedAt), "newest first")
}

func TestReplaySources(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	now := time.Now()
	var live []string
	for i, status := range []string{"succeeded", "failed", "succeeded", "cancelled"} {
		r := createRun(t, st, "t1")
		finishRun(t, st, r.RunID, status, now.Add(time.Duration(i)*time.Second))
		live = append(live, r.RunID)
	}
	running := createRun(t, st, "t1") // not terminal: never a source for last
	sim := newRunValue("t1", "wf", "sim")
	sim.Mode = string(execution.ModeSimulation)
	simRun, _, err := st.CreateRun(ctx, sim, "sim")
	require.NoError(t, err)
	finishRun(t, st, simRun.RunID, "succeeded", now)
	other := createRun(t, st, "t2")

	all, err := st.ReplaySources(ctx, "t1", "wf", 10, nil)
	require.NoError(t, err)
	assert.ElementsMatch(t, live, all, "terminal live runs only")
	two, err := st.ReplaySources(ctx, "t1", "wf", 2, nil)
	require.NoError(t, err)
	assert.Len(t, two, 2)
	ok, err := st.ReplaySources(ctx, "t1", "wf", 10, []string{"succeeded"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{live[0], live[2]}, ok)

	bad, err := st.NotReplaySource(ctx, "t1", "wf", []string{live[1], running.RunID})
	require.NoError(t, err)
	assert.Equal(t, "", bad, "a live run is a source whatever its status (the replay reports it)")
	for _, id := range []string{simRun.RunID, other.RunID, "nope"} {
		bad, err = st.NotReplaySource(ctx, "t1", "wf", []string{live[0], id})
		require.NoError(t, err)
		assert.Equal(t, id, bad)
	}
	bad, err = st.NotReplaySource(ctx, "t1", "other-wf", []string{live[0]})
	require.NoError(t, err)
	assert.Equal(t, live[0], bad, "another workflow's run")
}

func TestRetentionDeletesFinishedReplays(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	old, err := st.CreateReplay(ctx, newReplay("t1"), []string{"r1"})
	require.NoError(t, err)
	require.NoError(t, st.FinishReplay(ctx, "t1", old.ReplayID))
	_, err = st.Pool.Exec(ctx, `UPDATE replays SET finished_at = now() - interval '10 days' WHERE replay_id = $1`, old.ReplayID)
	require.NoError(t, err)
	recent, err := st.CreateReplay(ctx, newReplay("t1"), []string{"r1"})
	require.NoError(t, err)
	require.NoError(t, st.FinishReplay(ctx, "t1", recent.ReplayID))
	running, err := st.CreateReplay(ctx, newReplay("t1"), []string{"r1"})
	require.NoError(t, err)

	res, err := st.DeleteRunsClosedBefore(ctx, time.Now().Add(-5*24*time.Hour))
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Replays)
	_, _, err = st.GetReplay(ctx, "t1", old.ReplayID)
	require.ErrorIs(t, err, failure.ErrNotFound)
	var orphans int
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM replay_runs WHERE replay_id = $1`, old.ReplayID).Scan(&orphans))
	assert.Zero(t, orphans, "its runs went with it")
	for _, id := range []string{recent.ReplayID, running.ReplayID} {
		_, _, err = st.GetReplay(ctx, "t1", id)
		require.NoError(t, err, "replay %s is kept", id)
	}
}

func TestStaleReplays(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	stale, err := st.CreateReplay(ctx, newReplay("t1"), []string{"r2", "r1"})
	require.NoError(t, err)
	_, err = st.Pool.Exec(ctx, `UPDATE replays SET created_at = now() - interval '1 hour' WHERE replay_id = $1`, stale.ReplayID)
	require.NoError(t, err)
	_, err = st.CreateReplay(ctx, newReplay("t1"), []string{"r1"}) // fresh
	require.NoError(t, err)
	done, err := st.CreateReplay(ctx, newReplay("t2"), []string{"r1"})
	require.NoError(t, err)
	require.NoError(t, st.FinishReplay(ctx, "t2", done.ReplayID))
	_, err = st.Pool.Exec(ctx, `UPDATE replays SET created_at = now() - interval '1 hour' WHERE replay_id = $1`, done.ReplayID)
	require.NoError(t, err)

	list, runs, err := st.StaleReplays(ctx, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, stale.ReplayID, list[0].ReplayID)
	assert.Equal(t, [][]string{{"r2", "r1"}}, runs)

	// Once its start is issued, the sweeper leaves it alone.
	require.NoError(t, st.MarkReplayStarted(ctx, "t1", stale.ReplayID))
	list, _, err = st.StaleReplays(ctx, time.Minute, 10)
	require.NoError(t, err)
	assert.Empty(t, list)
}
