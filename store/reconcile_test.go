package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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
	if err := st.AppendEvents(ctx, "t1", c.RunID, []execution.EventDraft{
		{Key: c.RunID + "/-/0/run.succeeded/1", Type: execution.EventRunSucceeded, At: at},
	}, &execution.RunUpdate{Status: execution.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}

	var seen []string
	var after *store.RunCursor
	for {
		page, err := st.ActiveRuns(ctx, 0, after, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, page[0].RunID)
		after = &store.RunCursor{CreatedAt: page[0].CreatedAt, RunID: page[0].RunID}
	}
	if len(seen) != 2 || seen[0] != a.RunID || seen[1] != b.RunID {
		t.Fatalf("active runs = %v, want [%s %s]", seen, a.RunID, b.RunID)
	}
	if young, err := st.ActiveRuns(ctx, time.Hour, nil, 10); err != nil || len(young) != 0 {
		t.Fatalf("runs younger than an hour must wait: %v %v", young, err)
	}

	ev := execution.EventDraft{Key: a.RunID + "/-/0/run.failed/reconciled", Type: execution.EventRunFailed, At: at,
		Data: json.RawMessage(`{"reason":"TERMINATED_OUTSIDE_WEFT"}`)}
	upd := execution.RunUpdate{Status: execution.StatusFailed, Error: &execution.RunError{Code: "TERMINATED_OUTSIDE_WEFT", Message: "terminated"}}
	for i, want := range []bool{true, false} { // the second time the run is terminal already
		applied, err := st.SettleRun(ctx, "t1", a.RunID, ev, upd)
		if err != nil || applied != want {
			t.Fatalf("settle %d: applied=%v err=%v, want %v", i, applied, err, want)
		}
	}
	got, err := st.GetRun(ctx, "t1", a.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != execution.StatusFailed || got.FinishedAt == nil || !got.FinishedAt.Equal(at) {
		t.Fatalf("settled run = %s finished %v", got.Status, got.FinishedAt)
	}
	if err := st.VerifyChain(ctx, "t1", a.RunID); err != nil {
		t.Fatal(err)
	}
	// A terminal run is never settled again, whatever the event.
	ev.Key = c.RunID + "/-/0/run.failed/reconciled"
	if applied, err := st.SettleRun(ctx, "t1", c.RunID, ev, upd); err != nil || applied {
		t.Fatalf("settled a succeeded run: %v %v", applied, err)
	}
	events, _ := st.ListEvents(ctx, "t1", c.RunID, 0, 10)
	if len(events) != 1 {
		t.Fatalf("succeeded run has %d events, want 1", len(events))
	}
	if _, err := st.SettleRun(ctx, "t1", b.RunID, ev, execution.RunUpdate{Status: execution.StatusRunning}); err == nil {
		t.Fatal("a non-terminal settle must be refused")
	}
	if _, err := st.SettleRun(ctx, "t1", b.RunID, ev, upd); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("another tenant's run: %v", err)
	}
}

func TestRunFixtures(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	idem := uuid.NewString()
	r := newRunValue("t1", "wf", idem)
	r.Mode = string(execution.ModeSimulation)
	r.Fixtures = json.RawMessage(`{"a": {"output": 1}}`)
	if _, _, err := st.CreateRun(ctx, r, idem); err != nil {
		t.Fatal(err)
	}
	mode, fx, err := st.RunFixtures(ctx, "t1", r.RunID)
	if err != nil || mode != "simulation" || string(fx) != `{"a": {"output": 1}}` {
		t.Fatalf("fixtures = %q %s %v", mode, fx, err)
	}
	live := createRun(t, st, "t1")
	if mode, fx, err := st.RunFixtures(ctx, "t1", live.RunID); err != nil || mode != "live" || fx != nil {
		t.Fatalf("live run fixtures = %q %s %v", mode, fx, err)
	}
	if _, _, err := st.RunFixtures(ctx, "t2", r.RunID); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("another tenant: %v", err)
	}
}

// TestActiveRunsUseThePartialIndex: the reconciler's scan of non-terminal
// runs is served by runs_active, not by reading every run ever made.
func TestActiveRunsUseThePartialIndex(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	conn, err := st.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// An empty table makes a sequential scan cheapest; forbid it so the
	// plan shows whether a usable index exists.
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `EXPLAIN
		SELECT run_id, tenant_id, workflow_id, status, created_at FROM runs
		WHERE status IN ('queued', 'running')
		  AND created_at < now() - 1000 * interval '1 microsecond'
		  AND (created_at, run_id) > (now() - interval '1 day', 'x')
		ORDER BY created_at, run_id
		LIMIT 100`)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(plan, "\n")
	if !strings.Contains(joined, "runs_active") {
		t.Fatalf("the active-runs scan does not use runs_active:\n%s", joined)
	}
	if _, err := conn.Exec(ctx, `RESET enable_seqscan`); err != nil {
		t.Fatal(err)
	}
}
