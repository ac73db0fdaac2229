package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/failure"
)

// Usage is token and cost usage of agent model calls.
type Usage struct {
	Calls        int64
	InputTokens  int64
	OutputTokens int64
	// CostUSD is the cost in US dollars (0 when the model has no price).
	CostUSD float64
}

// AddUsage adds u to the run's usage totals ({calls, inputTokens,
// outputTokens, totalTokens, costUsd}). A run of another tenant is
// failure.ErrNotFound.
func (s *Store) AddUsage(ctx context.Context, tenantID, runID string, u Usage) error {
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error { return addUsage(ctx, tx, tenantID, runID, u) })
	if err != nil {
		return fmt.Errorf("store: add usage: %w", err)
	}
	return nil
}

func addUsage(ctx context.Context, tx pgx.Tx, tenantID, runID string, u Usage) error {
	if u.Calls < 0 || u.InputTokens < 0 || u.OutputTokens < 0 || u.CostUSD < 0 {
		return failure.New(failure.CodeInvalidRequest, "usage must not be negative")
	}
	// numeric keeps the cost sum exact; jsonb renders it as a JSON number.
	tag, err := tx.Exec(ctx, `UPDATE runs SET usage = usage || jsonb_build_object(
			'calls',        COALESCE((usage->>'calls')::bigint, 0) + $3::bigint,
			'inputTokens',  COALESCE((usage->>'inputTokens')::bigint, 0) + $4::bigint,
			'outputTokens', COALESCE((usage->>'outputTokens')::bigint, 0) + $5::bigint,
			'totalTokens',  COALESCE((usage->>'totalTokens')::bigint, 0) + $4::bigint + $5::bigint,
			'costUsd',      COALESCE((usage->>'costUsd')::numeric, 0) + $6::numeric),
			updated_at = now()
		WHERE run_id = $1 AND tenant_id = $2`,
		runID, tenantID, u.Calls, u.InputTokens, u.OutputTokens, strconv.FormatFloat(u.CostUSD, 'f', -1, 64))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return failure.ErrNotFound
	}
	return nil
}
