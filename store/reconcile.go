package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
)

// ActiveRun identifies a run whose row is not terminal yet (queued or
// running): what the reconciler compares with Temporal.
type ActiveRun struct {
	RunID      string
	TenantID   string
	WorkflowID string
	Status     string
	CreatedAt  time.Time
}

// ActiveRuns returns up to limit runs of every tenant whose status is
// queued or running and that were created before olderThan ago, oldest
// first, after the keyset position after (nil: from the start).
func (s *Store) ActiveRuns(ctx context.Context, olderThan time.Duration, after *RunCursor, limit int) ([]ActiveRun, error) {
	if limit <= 0 {
		limit = DefaultRunPageSize
	}
	limit = min(limit, MaxRunPageSize)
	var afterAt *time.Time
	var afterID *string
	if after != nil {
		afterAt, afterID = &after.CreatedAt, &after.RunID
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT run_id, tenant_id, workflow_id, status, created_at FROM runs
		WHERE status IN ('queued', 'running')
		  AND created_at < now() - $1::bigint * interval '1 microsecond'
		  AND ($2::timestamptz IS NULL OR (created_at, run_id) > ($2, $3::text))
		ORDER BY created_at, run_id
		LIMIT $4`, olderThan.Microseconds(), afterAt, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: active runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ActiveRun, error) {
		var a ActiveRun
		err := r.Scan(&a.RunID, &a.TenantID, &a.WorkflowID, &a.Status, &a.CreatedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: active runs: %w", err)
	}
	return out, nil
}

// ActiveRunsOfWorkflows returns the runs, of any tenant, whose Temporal
// workflow id is one of workflowIDs and whose row is still queued or
// running: the reconciler's recent pass asks it about the workflows
// Temporal's visibility lists as closed, most of which weft settled itself
// and are left out here. Ids of no run are ignored.
func (s *Store) ActiveRunsOfWorkflows(ctx context.Context, workflowIDs []string) ([]ActiveRun, error) {
	if len(workflowIDs) == 0 {
		return nil, nil
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT run_id, tenant_id, workflow_id, status, created_at FROM runs
		WHERE workflow_id = ANY($1::text[]) AND status IN ('queued', 'running')
		ORDER BY created_at, run_id`, workflowIDs)
	if err != nil {
		return nil, fmt.Errorf("store: active runs of workflows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ActiveRun, error) {
		var a ActiveRun
		err := r.Scan(&a.RunID, &a.TenantID, &a.WorkflowID, &a.Status, &a.CreatedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: active runs of workflows: %w", err)
	}
	return out, nil
}

// SettleRun appends the terminal event ev with the terminal update upd,
// but only while the run is still queued or running (checked under the run
// row lock): the reconciler uses it when Temporal closed a run outside
// weft, and must never append after the interpreter's own terminal event.
// It reports whether it applied anything; the event key makes it idempotent.
func (s *Store) SettleRun(ctx context.Context, tenantID, runID string, ev execution.EventDraft, upd execution.RunUpdate) (bool, error) {
	if !execution.Terminal(upd.Status) {
		return false, fmt.Errorf("store: settle run %s: status %q is not terminal", runID, upd.Status)
	}
	return s.appendEvents(ctx, tenantID, runID, []execution.EventDraft{ev}, &upd, true)
}

// RunFixtures returns a run's mode and its simulation fixtures (nil when it
// has none). Node activities load them by (tenant, run) rather than
// receiving them through Temporal. A run of another tenant is
// failure.ErrNotFound.
func (s *Store) RunFixtures(ctx context.Context, tenantID, runID string) (mode string, fixtures json.RawMessage, err error) {
	err = s.Pool.QueryRow(ctx, `SELECT mode, fixtures FROM runs WHERE run_id = $1 AND tenant_id = $2`,
		runID, tenantID).Scan(&mode, &fixtures)
	if err != nil {
		return "", nil, fmt.Errorf("store: run fixtures of %s: %w", runID, notFound(err))
	}
	return mode, fixtures, nil
}
