package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnqueueLookup names what an enqueue reads before its transaction.
type EnqueueLookup struct {
	TenantID, WorkflowKey, IdempotencyKey string
	// Revision names a published revision; nil resolves the latest one.
	Revision *int
	// RevokedOf is the principal whose revocations are read; "" reads none
	// (a simulation checks no node permissions).
	RevokedOf string
}

// EnqueueReads is what ReadForEnqueue found. Each part answers exactly what
// its single-purpose method (BoundRun, GetRevision / LatestRevision,
// GetWorkflow, RevokedScopes, GetWorkflowLimits) would have answered.
type EnqueueReads struct {
	// Bound is the run the idempotency key already started (BoundOK).
	Bound   Run
	BoundOK bool
	// WorkflowFound says the workflow exists; Limits are its limits (zero
	// when never set, like GetWorkflowLimits).
	WorkflowFound bool
	Limits        WorkflowLimits
	// Revision is the named (or latest) published revision (RevisionFound).
	Revision      Revision
	RevisionFound bool
	// Revoked are the scopes revoked from RevokedOf, sorted; nil when
	// RevokedOf is "".
	Revoked []string
}

// ReadForEnqueue reads, in ONE round trip (a pipelined batch), the
// idempotency binding, the workflow with its revision to run and its
// limits, and the actor's revocations: what an enqueue needs before its
// transaction. Every statement is the read the enqueue made on its own
// before; the batch only saves the round trips between them.
func (s *Store) ReadForEnqueue(ctx context.Context, q EnqueueLookup) (EnqueueReads, error) {
	var out EnqueueReads
	b := &pgx.Batch{}
	b.Queue(boundRunSQL, q.TenantID, q.WorkflowKey, q.IdempotencyKey).QueryRow(func(row pgx.Row) error {
		run, err := scanRun(row)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("store: read bound run: %w", err)
		}
		out.Bound, out.BoundOK = run, true
		return nil
	})
	var named *int32
	if q.Revision != nil {
		n := int32(*q.Revision)
		named = &n
	}
	// The revision joins the workflow row: a named one is looked up by its
	// number, the latest by latest_published_revision (0 = never published,
	// which matches no revision row since revisions start at 1).
	b.Queue(`
		SELECT r.revision, r.checksum, r.draft_revision, r.published_by, r.published_at,
			l.max_concurrent_runs, l.max_starts_per_minute, l.budget_max_tokens,
			l.budget_max_cost_usd, l.updated_by, l.updated_at
		FROM workflows w
		LEFT JOIN workflow_revisions r ON r.tenant_id = w.tenant_id AND r.key = w.key
			AND r.revision = COALESCE($3::integer, w.latest_published_revision)
		LEFT JOIN workflow_limits l ON l.tenant_id = w.tenant_id AND l.workflow_key = w.key
		WHERE w.tenant_id = $1 AND w.key = $2`,
		q.TenantID, q.WorkflowKey, named).QueryRow(func(row pgx.Row) error {
		var revision, draft *int
		var checksum, publishedBy, limitsBy *string
		var publishedAt, limitsAt *time.Time
		l := WorkflowLimits{TenantID: q.TenantID, WorkflowKey: q.WorkflowKey}
		err := row.Scan(&revision, &checksum, &draft, &publishedBy, &publishedAt,
			&l.MaxConcurrentRuns, &l.MaxStartsPerMinute, &l.Budget.MaxTokens, &l.Budget.MaxCostUSD, &limitsBy, &limitsAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("store: read workflow for enqueue: %w", err)
		}
		out.WorkflowFound = true
		if limitsBy != nil {
			l.UpdatedBy = *limitsBy
		}
		if limitsAt != nil {
			l.UpdatedAt = *limitsAt
		}
		out.Limits = l
		if revision != nil {
			out.RevisionFound = true
			out.Revision = Revision{Key: q.WorkflowKey, Revision: *revision, Checksum: *checksum,
				DraftRevision: *draft, PublishedBy: *publishedBy, PublishedAt: *publishedAt}
		}
		return nil
	})
	if q.RevokedOf != "" {
		b.Queue(revokedScopesSQL, q.TenantID, q.RevokedOf).Query(func(rows pgx.Rows) error {
			scopes, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("store: revoked scopes: %w", err)
			}
			out.Revoked = nonNilScopes(scopes)
			return nil
		})
	}
	if err := s.Pool.SendBatch(ctx, b).Close(); err != nil {
		return EnqueueReads{}, err
	}
	return out, nil
}
