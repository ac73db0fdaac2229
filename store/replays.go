package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// Replay statuses.
const (
	ReplayRunning = "running"
	ReplayDone    = "done"
)

// Replay is one replay of a draft against recorded live runs (issue 21).
type Replay struct {
	ReplayID      string
	TenantID      string
	TenantName    string
	WorkflowKey   string
	DraftRevision int
	Status        string
	// Fixtures are the request's fixtures for unrecorded nodes (nil: none).
	Fixtures json.RawMessage
	// Actor and Permissions are the requester's: its simulation runs are
	// enqueued with them, as the requester's own simulations would be.
	Actor       execution.Actor
	Permissions []string
	CreatedAt   time.Time
	FinishedAt  *time.Time
}

// ReplayRun is one recorded run of a replay and its verdict ("" while pending).
type ReplayRun struct {
	RunID           string
	Verdict         string
	Reason          string
	SimulationRunID string
	RecordedStatus  string
	SimulatedStatus string
	// Diff is the compact diff as JSON (nil while pending or when none).
	Diff       json.RawMessage
	FinishedAt *time.Time
}

// ReplayCursor is a keyset position in a workflow's replays, which are
// listed by (CreatedAt, ReplayID) descending.
type ReplayCursor struct {
	CreatedAt time.Time
	ReplayID  string
}

// Cursor returns the keyset position just after r.
func (r Replay) Cursor() ReplayCursor {
	return ReplayCursor{CreatedAt: r.CreatedAt, ReplayID: r.ReplayID}
}

// CreateReplay stores a running replay and one pending row per recorded
// run, in this order, in one transaction: a replay is never half-written.
func (s *Store) CreateReplay(ctx context.Context, r Replay, runIDs []string) (Replay, error) {
	actor, err := json.Marshal(r.Actor)
	if err != nil {
		return Replay{}, fmt.Errorf("store: replay actor: %w", err)
	}
	perms := r.Permissions
	if perms == nil {
		perms = []string{}
	}
	var fixtures any
	if len(r.Fixtures) > 0 {
		fixtures = r.Fixtures
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO replays (replay_id, tenant_id, tenant_name, workflow_key, draft_revision,
				fixtures, actor, permissions)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING status, created_at`,
			r.ReplayID, r.TenantID, r.TenantName, r.WorkflowKey, r.DraftRevision, fixtures, actor, perms).
			Scan(&r.Status, &r.CreatedAt); err != nil {
			return err
		}
		rows := make([][]any, len(runIDs))
		for i, id := range runIDs {
			rows[i] = []any{r.ReplayID, r.TenantID, i, id}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"replay_runs"}, []string{"replay_id", "tenant_id", "ordinal", "run_id"},
			pgx.CopyFromRows(rows))
		return err
	})
	if err != nil {
		return Replay{}, fmt.Errorf("store: create replay: %w", err)
	}
	r.Permissions = perms
	return r, nil
}

const replayColumns = `replay_id, tenant_id, tenant_name, workflow_key, draft_revision, status, fixtures, actor,
	permissions, created_at, finished_at`

func scanReplay(row pgx.Row) (Replay, error) {
	var r Replay
	var actor []byte
	if err := row.Scan(&r.ReplayID, &r.TenantID, &r.TenantName, &r.WorkflowKey, &r.DraftRevision, &r.Status,
		&r.Fixtures, &actor, &r.Permissions, &r.CreatedAt, &r.FinishedAt); err != nil {
		return Replay{}, err
	}
	if err := json.Unmarshal(actor, &r.Actor); err != nil {
		return Replay{}, fmt.Errorf("store: replay %s actor: %w", r.ReplayID, err)
	}
	return r, nil
}

// GetReplay returns one replay of the tenant with its runs in the order
// they were chosen; another tenant's replay is failure.ErrNotFound, like a
// missing one.
func (s *Store) GetReplay(ctx context.Context, tenantID, replayID string) (Replay, []ReplayRun, error) {
	r, err := scanReplay(s.Pool.QueryRow(ctx, `SELECT `+replayColumns+` FROM replays
		WHERE replay_id = $1 AND tenant_id = $2`, replayID, tenantID))
	if err != nil {
		return Replay{}, nil, notFound(err)
	}
	rows, err := s.Pool.Query(ctx, `SELECT run_id, verdict, reason, simulation_run_id, recorded_status,
			simulated_status, diff, finished_at
		FROM replay_runs WHERE replay_id = $1 AND tenant_id = $2 ORDER BY ordinal`, replayID, tenantID)
	if err != nil {
		return Replay{}, nil, fmt.Errorf("store: replay runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReplayRun, error) {
		var rr ReplayRun
		err := row.Scan(&rr.RunID, &rr.Verdict, &rr.Reason, &rr.SimulationRunID, &rr.RecordedStatus,
			&rr.SimulatedStatus, &rr.Diff, &rr.FinishedAt)
		return rr, err
	})
	if err != nil {
		return Replay{}, nil, fmt.Errorf("store: replay runs: %w", err)
	}
	return r, runs, nil
}

// ReplaySummary counts a replay's runs by verdict ("" counts pending ones).
type ReplaySummary map[string]int

// ListReplays returns a workflow's replays, newest first, one keyset page
// at a time, with each one's verdict counts.
func (s *Store) ListReplays(ctx context.Context, tenantID, workflowKey string, before *ReplayCursor, limit int) ([]Replay, []ReplaySummary, error) {
	if limit <= 0 {
		limit = DefaultRunPageSize
	}
	limit = min(limit, MaxRunPageSize)
	var beforeAt *time.Time
	var beforeID *string
	if before != nil {
		beforeAt, beforeID = &before.CreatedAt, &before.ReplayID
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+replayColumns+` FROM replays
		WHERE tenant_id = $1 AND workflow_key = $2
		  AND ($3::timestamptz IS NULL OR (created_at, replay_id) < ($3, $4::text))
		ORDER BY created_at DESC, replay_id DESC LIMIT $5`, tenantID, workflowKey, beforeAt, beforeID, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list replays: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replay, error) { return scanReplay(row) })
	if err != nil {
		return nil, nil, fmt.Errorf("store: list replays: %w", err)
	}
	ids := make([]string, len(list))
	index := make(map[string]int, len(list))
	for i, r := range list {
		ids[i] = r.ReplayID
		index[r.ReplayID] = i
	}
	sums := make([]ReplaySummary, len(list))
	for i := range sums {
		sums[i] = ReplaySummary{}
	}
	rows, err = s.Pool.Query(ctx, `SELECT replay_id, verdict, count(*) FROM replay_runs
		WHERE tenant_id = $1 AND replay_id = ANY($2) GROUP BY replay_id, verdict`, tenantID, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("store: replay summaries: %w", err)
	}
	var id, verdict string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &verdict, &n}, func() error {
		sums[index[id]][verdict] = n
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("store: replay summaries: %w", err)
	}
	return list, sums, nil
}

// SetReplaySimulation records the simulation run a replayed run started, so
// it shows while the comparison is pending.
func (s *Store) SetReplaySimulation(ctx context.Context, tenantID, replayID, runID, simulationRunID string) error {
	tag, err := s.Pool.Exec(ctx, `UPDATE replay_runs SET simulation_run_id = $4
		WHERE tenant_id = $1 AND replay_id = $2 AND run_id = $3`, tenantID, replayID, runID, simulationRunID)
	if err != nil {
		return fmt.Errorf("store: set replay simulation: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return failure.ErrNotFound
	}
	return nil
}

// SetReplayVerdict stores a replayed run's verdict. It is idempotent: a
// repeated comparison (a retried activity) overwrites it with the same.
func (s *Store) SetReplayVerdict(ctx context.Context, tenantID, replayID string, rr ReplayRun) error {
	var diff any
	if len(rr.Diff) > 0 {
		diff = rr.Diff
	}
	tag, err := s.Pool.Exec(ctx, `UPDATE replay_runs SET verdict = $4, reason = $5, simulation_run_id = $6,
			recorded_status = $7, simulated_status = $8, diff = $9, finished_at = now()
		WHERE tenant_id = $1 AND replay_id = $2 AND run_id = $3`,
		tenantID, replayID, rr.RunID, rr.Verdict, rr.Reason, rr.SimulationRunID, rr.RecordedStatus, rr.SimulatedStatus, diff)
	if err != nil {
		return fmt.Errorf("store: set replay verdict: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return failure.ErrNotFound
	}
	return nil
}

// FinishReplay marks a replay done (once; a repeat keeps the first time).
func (s *Store) FinishReplay(ctx context.Context, tenantID, replayID string) error {
	tag, err := s.Pool.Exec(ctx, `UPDATE replays SET status = 'done', finished_at = COALESCE(finished_at, now())
		WHERE tenant_id = $1 AND replay_id = $2`, tenantID, replayID)
	if err != nil {
		return fmt.Errorf("store: finish replay: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return failure.ErrNotFound
	}
	return nil
}

// DeleteReplay deletes a replay and its runs: the API undoes a replay whose
// driver could not be started.
func (s *Store) DeleteReplay(ctx context.Context, tenantID, replayID string) error {
	if _, err := s.Pool.Exec(ctx, `DELETE FROM replays WHERE tenant_id = $1 AND replay_id = $2`, tenantID, replayID); err != nil {
		return fmt.Errorf("store: delete replay: %w", err)
	}
	return nil
}

// ReplaySources returns the ids of the last n terminal live runs of a
// workflow, newest first, with one of statuses (none: any terminal one).
// Simulation runs, a replay's own included, are never sources.
func (s *Store) ReplaySources(ctx context.Context, tenantID, workflowKey string, n int, statuses []string) ([]string, error) {
	if len(statuses) == 0 {
		statuses = []string{execution.StatusSucceeded, execution.StatusFailed, execution.StatusCancelled}
	}
	rows, err := s.Pool.Query(ctx, `SELECT run_id FROM runs
		WHERE tenant_id = $1 AND workflow_key = $2 AND mode = 'live' AND status = ANY($3)
		ORDER BY created_at DESC, run_id DESC LIMIT $4`, tenantID, workflowKey, statuses, n)
	if err != nil {
		return nil, fmt.Errorf("store: replay sources: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: replay sources: %w", err)
	}
	return ids, nil
}

// NotReplaySource returns the first of ids that is not a live run of the
// workflow in the tenant ("" when all are): another tenant's run, a
// simulation run or another workflow's run cannot be replayed.
func (s *Store) NotReplaySource(ctx context.Context, tenantID, workflowKey string, ids []string) (string, error) {
	rows, err := s.Pool.Query(ctx, `SELECT run_id FROM runs
		WHERE tenant_id = $1 AND workflow_key = $2 AND mode = 'live' AND run_id = ANY($3)`, tenantID, workflowKey, ids)
	if err != nil {
		return "", fmt.Errorf("store: check replay sources: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("store: check replay sources: %w", err)
	}
	ok := make(map[string]bool, len(found))
	for _, id := range found {
		ok[id] = true
	}
	for _, id := range ids {
		if !ok[id] {
			return id, nil
		}
	}
	return "", nil
}

// deleteReplaysFinishedBefore deletes the replays that finished before t
// (their runs go with them), in batches; retention calls it beside runs.
func (s *Store) deleteReplaysFinishedBefore(ctx context.Context, t time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.Pool.Exec(ctx, `DELETE FROM replays WHERE replay_id IN (
			SELECT replay_id FROM replays WHERE finished_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, t, retentionBatch)
		if err != nil {
			return total, fmt.Errorf("store: delete replays: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < retentionBatch {
			return total, nil
		}
	}
}

// MarkReplayStarted notes that the replay's workflow start was issued, so
// StaleReplays no longer offers it to the sweeper.
func (s *Store) MarkReplayStarted(ctx context.Context, tenantID, replayID string) error {
	if _, err := s.Pool.Exec(ctx, `UPDATE replays SET started_at = now()
		WHERE tenant_id = $1 AND replay_id = $2 AND started_at IS NULL`, tenantID, replayID); err != nil {
		return fmt.Errorf("store: mark replay started: %w", err)
	}
	return nil
}

// StaleReplays returns replays of every tenant still running, and never
// marked started (MarkReplayStarted), olderThan after they were created,
// oldest first, with their runs' ids in order: the replay sweeper starts
// their workflows again (the start is idempotent on the workflow id), so a
// replay whose start was lost (the API died between storing it and
// starting it) is still replayed.
func (s *Store) StaleReplays(ctx context.Context, olderThan time.Duration, limit int) ([]Replay, [][]string, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+replayColumns+` FROM replays
		WHERE status = 'running' AND started_at IS NULL AND created_at < now() - $1::bigint * interval '1 microsecond'
		ORDER BY created_at LIMIT $2`, olderThan.Microseconds(), limit)
	if err != nil {
		return nil, nil, fmt.Errorf("store: stale replays: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replay, error) { return scanReplay(row) })
	if err != nil {
		return nil, nil, fmt.Errorf("store: stale replays: %w", err)
	}
	runs := make([][]string, len(list))
	for i, r := range list {
		ids, err := s.Pool.Query(ctx, `SELECT run_id FROM replay_runs WHERE replay_id = $1 ORDER BY ordinal`, r.ReplayID)
		if err != nil {
			return nil, nil, fmt.Errorf("store: stale replay runs: %w", err)
		}
		if runs[i], err = pgx.CollectRows(ids, pgx.RowTo[string]); err != nil {
			return nil, nil, fmt.Errorf("store: stale replay runs: %w", err)
		}
	}
	return list, runs, nil
}
