package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// PutValue stores a large port value (the claim check of SPEC §5) under
// (tenant, run, node, port, sha256 of its bytes) and returns the reference
// that travels through Temporal instead of the value. Storing the same value
// again is a no-op, so a re-executed activity is harmless.
func (s *Store) PutValue(ctx context.Context, tenantID, runID, nodeID, port string, value json.RawMessage) (execution.ValueRef, error) {
	if !json.Valid(value) {
		return execution.ValueRef{}, failure.New(failure.CodeInvalidRequest, "value of %s.%s is not valid JSON", nodeID, port)
	}
	ref := execution.ValueRef{NodeID: nodeID, Port: port, SHA256: graph.SHA256Hex(value), Size: len(value)}
	_, err := s.Pool.Exec(ctx, `
		INSERT INTO run_values (tenant_id, run_id, node_id, port, sha256, value, size)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT DO NOTHING`,
		tenantID, runID, nodeID, port, ref.SHA256, []byte(value), ref.Size)
	if isUnstorableJSON(err) {
		return execution.ValueRef{}, failure.Wrap(err, failure.CodeInvalidRequest,
			"value of %s.%s cannot be stored: %s", nodeID, port, pgMessage(err))
	}
	if err != nil {
		return execution.ValueRef{}, fmt.Errorf("store: put value: %w", err)
	}
	return ref, nil
}

// GetValue loads a claim-checked value of the tenant's run, or
// failure.ErrNotFound.
func (s *Store) GetValue(ctx context.Context, tenantID, runID string, ref execution.ValueRef) (json.RawMessage, error) {
	v, err := getValue(ctx, s.Pool, tenantID, runID, ref)
	if err != nil {
		return nil, fmt.Errorf("store: get value %s.%s: %w", ref.NodeID, ref.Port, err)
	}
	return v, nil
}

func getValue(ctx context.Context, q querier, tenantID, runID string, ref execution.ValueRef) (json.RawMessage, error) {
	var v []byte
	err := q.QueryRow(ctx, `SELECT value FROM run_values
		WHERE tenant_id = $1 AND run_id = $2 AND node_id = $3 AND port = $4 AND sha256 = $5`,
		tenantID, runID, ref.NodeID, ref.Port, ref.SHA256).Scan(&v)
	if err != nil {
		return nil, notFound(err)
	}
	return v, nil
}

// valueJSON returns the JSON a Value stands for, loading a reference.
func valueJSON(ctx context.Context, q querier, tenantID, runID string, v execution.Value) ([]byte, error) {
	if v.Ref != nil {
		return getValue(ctx, q, tenantID, runID, *v.Ref)
	}
	if len(v.Inline) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(v.Inline) {
		return nil, failure.New(failure.CodeInvalidRequest, "value is not valid JSON")
	}
	return v.Inline, nil
}
