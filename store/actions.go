package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// CodeContractChanged refuses a contract published under an id@version
// that already holds another contract.
const CodeContractChanged = "ACTION_CONTRACT_CHANGED"

// PublishedAction is one action contract in the catalog with its hash.
type PublishedAction struct {
	Contract    graph.ActionContract
	Hash        string
	PublishedAt time.Time
}

// PublishActionContracts publishes a worker's contracts to the catalog, in
// one transaction: a new id@version is inserted with its content hash
// (graph.ActionContract.ContentHash, which is catalog.ContractHash); one
// already published with the same hash is left as is; one published with
// another hash refuses the whole batch with ACTION_CONTRACT_CHANGED naming
// it (a changed contract needs a new version), so the worker refuses to start.
func (s *Store) PublishActionContracts(ctx context.Context, contracts []graph.ActionContract) error {
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		for _, c := range contracts {
			hash, err := c.ContentHash()
			if err != nil || c.ID == "" || c.Version < 1 {
				return failure.New(failure.CodeInvalidRequest, "contract %s@%d has no id or version, or cannot be hashed", c.ID, c.Version)
			}
			a := PublishedAction{Contract: c, Hash: hash}
			raw, err := json.Marshal(c)
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO action_contracts (action_id, version, risk, contract, hash)
				VALUES ($1, $2, $3, $4, $5) ON CONFLICT (action_id, version) DO NOTHING`,
				c.ID, c.Version, string(c.Risk), raw, a.Hash)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				continue
			}
			var have string
			if err := tx.QueryRow(ctx, `SELECT hash FROM action_contracts WHERE action_id = $1 AND version = $2`,
				c.ID, c.Version).Scan(&have); err != nil {
				return err
			}
			if have != a.Hash {
				ref := graph.ActionRef{ID: c.ID, Version: c.Version}
				return failure.New(CodeContractChanged,
					"action %s is already published with another contract (hash %s; this worker registers hash %s): "+
						"a published id@version never changes, so register the changed contract as version %d",
					ref, have, a.Hash, c.Version+1).
					WithDetails(map[string]any{"action": ref.String(), "publishedHash": have, "hash": a.Hash})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: publish action contracts: %w", err)
	}
	return nil
}

// ListActionContracts returns every published contract sorted by id then version.
func (s *Store) ListActionContracts(ctx context.Context) ([]PublishedAction, error) {
	rows, err := s.Pool.Query(ctx, `SELECT contract, hash, published_at FROM action_contracts ORDER BY action_id, version`)
	if err != nil {
		return nil, fmt.Errorf("store: list action contracts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PublishedAction, error) {
		var a PublishedAction
		var raw []byte
		if err := row.Scan(&raw, &a.Hash, &a.PublishedAt); err != nil {
			return a, err
		}
		return a, json.Unmarshal(raw, &a.Contract)
	})
	if err != nil {
		return nil, fmt.Errorf("store: list action contracts: %w", err)
	}
	return out, nil
}

// PublishedContracts implements publication.ActionSource: every published contract.
func (s *Store) PublishedContracts(ctx context.Context) ([]graph.ActionContract, error) {
	all, err := s.ListActionContracts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]graph.ActionContract, len(all))
	for i, a := range all {
		out[i] = a.Contract
	}
	return out, nil
}
