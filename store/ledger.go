package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/failure"
)

// ErrLedgerConflict marks a ledger key reused with another input. It is
// wrapped in a failure.Error with code IDEMPOTENCY_CONFLICT; match it with
// errors.Is. The write fails closed: nothing is written.
var ErrLedgerConflict = errors.New("store: idempotency key already used with another input")

// LedgerLookup reads the ledger entry (tenant, tool, key). It returns the
// first result when the key was used with inputHash, found=false when the
// key is unused, and an IDEMPOTENCY_CONFLICT error (errors.Is
// ErrLedgerConflict) when it was used with another input: fail closed.
func (s *Store) LedgerLookup(ctx context.Context, tenantID, tool, key, inputHash string) (result json.RawMessage, found bool, err error) {
	var bound string
	err = s.Pool.QueryRow(ctx, `SELECT input_hash, result FROM action_ledger WHERE tenant_id = $1 AND tool = $2 AND key = $3`,
		tenantID, tool, key).Scan(&bound, &result)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: ledger lookup: %w", err)
	}
	if bound != inputHash {
		return nil, false, ledgerConflict(tool, key)
	}
	return result, true, nil
}

// LedgerRecord binds (tenant, tool, key) to inputHash and result unless the
// key is bound already. It returns the bound result: result itself, or the
// first result when an earlier call (or the action's own ledger write, as
// workspace.notes.write@1 does) bound the key with the same input hash; a
// binding with another input hash is IDEMPOTENCY_CONFLICT.
func (s *Store) LedgerRecord(ctx context.Context, tenantID, tool, key, inputHash string, result json.RawMessage) (json.RawMessage, error) {
	if tenantID == "" || tool == "" || key == "" || inputHash == "" || !json.Valid(result) {
		return nil, failure.New(failure.CodeInvalidRequest, "tenant, tool, key, input hash and a JSON result are required")
	}
	var bound json.RawMessage
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		first, err := claimLedger(ctx, tx, tenantID, tool, key, inputHash, result)
		if err != nil {
			return err
		}
		bound = result
		if first != nil {
			bound = first
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: ledger record: %w", err)
	}
	return bound, nil
}

func ledgerConflict(tool, key string) error {
	return failure.Wrap(ErrLedgerConflict, failure.CodeIdempotencyConflict,
		"%s was already called with key %q and another input; refusing to call it again", tool, key).
		WithDetails(map[string]any{"tool": tool, "key": key})
}

// claimLedger claims (tenant, tool, key) for inputHash with result. It
// returns nil when this call claimed the key (the caller performs the write
// in the same transaction), the first result when the key was already claimed
// with the same input hash, and an IDEMPOTENCY_CONFLICT error when it was
// claimed with another. Concurrent claimers of one key wait for the first
// transaction (ON CONFLICT), so exactly one write happens.
func claimLedger(ctx context.Context, tx pgx.Tx, tenantID, tool, key, inputHash string, result []byte) (json.RawMessage, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO action_ledger (tenant_id, tool, key, input_hash, result)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, tool, key) DO NOTHING`,
		tenantID, tool, key, inputHash, result)
	if err != nil {
		return nil, fmt.Errorf("claim ledger: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil, nil
	}
	var boundHash string
	var first []byte
	if err := tx.QueryRow(ctx, `SELECT input_hash, result FROM action_ledger WHERE tenant_id = $1 AND tool = $2 AND key = $3`,
		tenantID, tool, key).Scan(&boundHash, &first); err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	if boundHash != inputHash {
		return nil, failure.Wrap(ErrLedgerConflict, failure.CodeIdempotencyConflict,
			"%s was already called with key %q and another input; refusing to write again", tool, key).
			WithDetails(map[string]any{"tool": tool, "key": key})
	}
	return first, nil
}
