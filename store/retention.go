package store

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// RetentionResult counts what DeleteRunsClosedBefore deleted.
type RetentionResult struct {
	Runs        int64
	Events      int64
	Transcripts int64
	Values      int64
	// NodeResults are the recorded node values (migration 00018).
	NodeResults   int64
	LedgerEntries int64
	// Replays counts replays (issue 21) that finished before the cut-off:
	// they are kept like runs.
	Replays int64
}

// retentionBatch is how many runs one retention transaction deletes, so no
// transaction holds many locks.
const retentionBatch = 100

// DeleteRunsClosedBefore deletes every run that finished (succeeded,
// failed or cancelled) before t, with what belongs to it alone: its
// events, agent transcripts, claim-checked values, recorded node results
// and idempotency ledger entries (their keys start with the run: a closed run never calls an
// action again, so its entries are past their idempotency window). Notes
// and other business writes stay: they belong to the tenant's workspace.
// Each run's idempotency binding stays too, marked with when its run
// finished and was deleted; DeleteExpiredBindings removes it later (and
// CreateRun answers a reused key with RUN_DELETED meanwhile). Replays that
// finished before t go too, with their verdicts. It works in batches,
// skipping rows another transaction holds.
func (s *Store) DeleteRunsClosedBefore(ctx context.Context, t time.Time) (RetentionResult, error) {
	var total RetentionResult
	for {
		n, err := s.deleteRunBatch(ctx, t, &total)
		if err != nil {
			return total, fmt.Errorf("store: delete runs: %w", err)
		}
		if n < retentionBatch {
			if total.Replays, err = s.deleteReplaysFinishedBefore(ctx, t); err != nil {
				return total, err
			}
			return total, nil
		}
	}
}

type doomedRun struct {
	runID, tenantID string
	finishedAt      time.Time
}

func (s *Store) deleteRunBatch(ctx context.Context, t time.Time, total *RetentionResult) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT run_id, tenant_id, finished_at FROM runs
			WHERE finished_at < $1 AND status IN ('succeeded', 'failed', 'cancelled')
			ORDER BY finished_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED`, t, retentionBatch)
		if err != nil {
			return err
		}
		doomed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (doomedRun, error) {
			var d doomedRun
			err := r.Scan(&d.runID, &d.tenantID, &d.finishedAt)
			return d, err
		})
		if err != nil {
			return err
		}
		n = len(doomed)
		if n == 0 {
			return nil
		}
		b := &pgx.Batch{}
		counts := make([]*int64, 0, 7*n)
		queue := func(dst *int64, sql string, args ...any) {
			b.Queue(sql, args...)
			counts = append(counts, dst)
		}
		var ignored int64
		for _, d := range doomed {
			agentFrom, agentTo := keyPrefixRange(url.PathEscape(d.runID) + "/")
			actionFrom, actionTo := keyPrefixRange(url.PathEscape(d.tenantID) + "/" + url.PathEscape(d.runID) + "/")
			queue(&ignored, `UPDATE idempotency_bindings SET run_finished_at = $2, run_deleted_at = now()
				WHERE run_id = $1`, d.runID, d.finishedAt)
			queue(&total.Transcripts, `DELETE FROM agent_transcripts WHERE tenant_id = $1 AND run_id = $2`, d.tenantID, d.runID)
			queue(&total.Values, `DELETE FROM run_values WHERE tenant_id = $1 AND run_id = $2`, d.tenantID, d.runID)
			queue(&total.NodeResults, `DELETE FROM node_results WHERE tenant_id = $1 AND run_id = $2`, d.tenantID, d.runID)
			queue(&total.LedgerEntries, `DELETE FROM action_ledger WHERE tenant_id = $1
				AND ((key ~>=~ $2 AND key ~<~ $3) OR (key ~>=~ $4 AND key ~<~ $5))`,
				d.tenantID, agentFrom, agentTo, actionFrom, actionTo)
			queue(&total.Events, `DELETE FROM run_events WHERE run_id = $1`, d.runID)
			queue(&total.Runs, `DELETE FROM runs WHERE run_id = $1`, d.runID)
		}
		res := tx.SendBatch(ctx, b)
		for _, dst := range counts {
			tag, err := res.Exec()
			if err != nil {
				_ = res.Close()
				return err
			}
			*dst += tag.RowsAffected()
		}
		return res.Close()
	})
	return n, err
}

// keyPrefixRange is the half-open range [prefix, next) of the keys that
// start with prefix, which ends in '/': next replaces that '/' with the
// following byte, '0'. Compared bytewise (text_pattern_ops), so the ledger's
// (tenant_id, key text_pattern_ops) index serves it.
func keyPrefixRange(prefix string) (from, to string) {
	return prefix, prefix[:len(prefix)-1] + "0"
}

// DeleteExpiredBindings deletes the idempotency bindings whose run
// retention deleted and which finished before t: the worker passes now
// minus the Temporal namespace's retention (and a margin), so a binding
// outlives its run at least as long as Temporal may hold the run's
// workflow id. It returns how many it deleted.
func (s *Store) DeleteExpiredBindings(ctx context.Context, t time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.Pool.Exec(ctx, `DELETE FROM idempotency_bindings WHERE ctid IN (
			SELECT ctid FROM idempotency_bindings
			WHERE run_deleted_at IS NOT NULL AND run_finished_at < $1
			LIMIT 1000)`, t)
		if err != nil {
			return total, fmt.Errorf("store: delete expired bindings: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 1000 {
			return total, nil
		}
	}
}

// DeleteScheduleFiringsBefore deletes the stored inputs of templated
// schedule firings created before t (a firing is retried for 15 minutes at
// most; the worker keeps them a week).
func (s *Store) DeleteScheduleFiringsBefore(ctx context.Context, t time.Time) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `DELETE FROM schedule_firings WHERE created_at < $1`, t)
	if err != nil {
		return 0, fmt.Errorf("store: delete schedule firings: %w", err)
	}
	return tag.RowsAffected(), nil
}
