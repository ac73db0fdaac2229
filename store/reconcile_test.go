package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func TestActiveRunsAndSettleRun(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	a, b, c := createRun(t, st, "t1"), createRun(t, st, "t2"), createRun(t, st, "t1")
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// c finishes the ordinary way.
	require.NoError(t, st.AppendEvents(ctx, "t1", c.RunID, []execution.EventDraft{
		{Key: c.RunID + "/-/0/run.succeeded/1", Type: execution.EventRunSucceeded, At: at},
	}, &execution.RunUpdate{Status: execution.StatusSucceeded}))

	var seen []string
	var after *store.RunCursor
	for {
		page, err := st.ActiveRuns(ctx, 0, after, 1)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		seen = append(seen, page[0].RunID)
		after = &store.RunCursor{CreatedAt: page[0].CreatedAt, RunID: page[0].RunID}
	}
	require.Len(t, seen, 2, "active runs = %v, want [%s %s]", seen, a.RunID, b.RunID)
	require.Equal(t, a.RunID, seen[0], "active runs = %v, want [%s %s]", seen, a.RunID, b.RunID)
	require.Equal(t, b.RunID, seen[1], "active runs = %v, want [%s %s]", seen, a.RunID, b.RunID)
	young, err := st.ActiveRuns(ctx, time.Hour, nil, 10)
	require.NoError(t, err, "runs younger than an hour must wait: %v", young)
	require.Empty(t, young, "runs younger than an hour must wait: %v %v", young, err)

	ev := execution.EventDraft{Key: a.RunID + "/-/0/run.failed/reconciled", Type: execution.EventRunFailed, At: at,
		Data: json.RawMessage(`{"reason":"TERMINATED_OUTSIDE_WEFT"}`)}
	upd := execution.RunUpdate{Status: execution.StatusFailed, Error: &execution.RunError{Code: "TERMINATED_OUTSIDE_WEFT", Message: "terminated"}}
	for i, want := range []bool{true, false} { // the second time the run is terminal already
		applied, err := st.SettleRun(ctx, "t1", a.RunID, ev, upd)
		require.NoError(t, err, "settle %d: applied=%v err=%v, want %v", i, applied, err, want)
		require.Equal(t, want, applied, "settle %d: applied=%v err=%v, want %v", i, applied, err, want)
	}
	got, err := st.GetRun(ctx, "t1", a.RunID)
	require.NoError(t, err)
	require.Equal(t, execution.StatusFailed, got.Status, "settled run = %s finished %v", got.Status, got.FinishedAt)
	require.NotNil(t, got.FinishedAt, "settled run = %s finished %v", got.Status, got.FinishedAt)
	require.True(t, got.FinishedAt.Equal(at), "settled run = %s finished %v", got.Status, got.FinishedAt)
	require.NoError(t, st.VerifyChain(ctx, "t1", a.RunID))
	// A terminal run is never settled again, whatever the event.
	ev.Key = c.RunID + "/-/0/run.failed/reconciled"
	applied, err := st.SettleRun(ctx, "t1", c.RunID, ev, upd)
	require.NoError(t, err, "settled a succeeded run: %v", applied)
	require.False(t, applied, "settled a succeeded run: %v %v", applied, err)
	events, _ := st.ListEvents(ctx, "t1", c.RunID, 0, 10)
	require.Len(t, events, 1, "succeeded run has %d events, want 1", len(events))
	_, err = st.SettleRun(ctx, "t1", b.RunID, ev, execution.RunUpdate{Status: execution.StatusRunning})
	require.Error(t, err, "a non-terminal settle must be refused")
	_, err = st.SettleRun(ctx, "t1", b.RunID, ev, upd)
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant's run: %v", err)
}

// TestActiveRunsOfWorkflows: of the workflow ids asked about, the ones
// whose runs are still queued or running, of any tenant; settled runs and
// ids of no run are left out.
func TestActiveRunsOfWorkflows(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	a, b, c, other := createRun(t, st, "t1"), createRun(t, st, "t2"), createRun(t, st, "t1"), createRun(t, st, "t1")
	require.NoError(t, st.AppendEvents(ctx, "t1", c.RunID, []execution.EventDraft{
		{Key: c.RunID + "/-/0/run.succeeded/1", Type: execution.EventRunSucceeded, At: time.Now()},
	}, &execution.RunUpdate{Status: execution.StatusSucceeded}))

	got, err := st.ActiveRunsOfWorkflows(ctx, []string{c.WorkflowID, b.WorkflowID, "weft-no-such-workflow", a.WorkflowID})
	require.NoError(t, err)
	ids := map[string]string{}
	for _, r := range got {
		ids[r.RunID] = r.TenantID
		require.NotEmpty(t, r.WorkflowID)
		require.Contains(t, []string{"queued", "running"}, r.Status)
	}
	require.Equal(t, map[string]string{a.RunID: "t1", b.RunID: "t2"}, ids, "%s is settled, %s was not asked about", c.RunID, other.RunID)

	none, err := st.ActiveRunsOfWorkflows(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestRunFixtures(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	idem := uuid.NewString()
	r := newRunValue("t1", "wf", idem)
	r.Mode = string(execution.ModeSimulation)
	r.Fixtures = json.RawMessage(`{"a": {"output": 1}}`)
	_, _, err := st.CreateRun(ctx, r, idem)
	require.NoError(t, err)
	mode, fx, err := st.RunFixtures(ctx, "t1", r.RunID)
	require.NoError(t, err, "fixtures = %q %s", mode, fx)
	require.Equal(t, "simulation", mode, "fixtures = %q %s %v", mode, fx, err)
	require.Equal(t, `{"a": {"output": 1}}`, string(fx), "fixtures = %q %s %v", mode, fx, err)
	live := createRun(t, st, "t1")
	mode, fx, err = st.RunFixtures(ctx, "t1", live.RunID)
	require.NoError(t, err, "live run fixtures = %q %s", mode, fx)
	require.Equal(t, "live", mode, "live run fixtures = %q %s %v", mode, fx, err)
	require.Nil(t, fx, "live run fixtures = %q %s %v", mode, fx, err)
	_, _, err = st.RunFixtures(ctx, "t2", r.RunID)
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant: %v", err)
}

// TestActiveRunsUseThePartialIndex: the reconciler's scan of non-terminal
// runs is served by runs_active, not by reading every run ever made.
func TestActiveRunsUseThePartialIndex(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	conn, err := st.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	// An empty table makes a sequential scan cheapest; forbid it so the
	// plan shows whether a usable index exists.
	_, err = conn.Exec(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	rows, err := conn.Query(ctx, `EXPLAIN
		SELECT run_id, tenant_id, workflow_id, status, created_at FROM runs
		WHERE status IN ('queued', 'running')
		  AND created_at < now() - 1000 * interval '1 microsecond'
		  AND (created_at, run_id) > (now() - interval '1 day', 'x')
		ORDER BY created_at, run_id
		LIMIT 100`)
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	joined := strings.Join(plan, "\n")
	require.Contains(t, joined, "runs_active", "the active-runs scan does not use runs_active:\n%s", joined)
	_, err = conn.Exec(ctx, `RESET enable_seqscan`)
	require.NoError(t, err)
}
