package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// Bounds of a layout: one position per node a graph may hold
// (graph.DefaultLimits.MaxNodes), short node ids, and coordinates a canvas
// can draw.
const (
	// MaxLayoutNodeID bounds the length of a node id in a layout.
	MaxLayoutNodeID = 128
	// MaxLayoutCoordinate bounds |x| and |y|.
	MaxLayoutCoordinate = 1e6
)

// Position is where the editor drew one node: its top-left corner in
// canvas units.
type Position struct {
	X float64 `json:"x" required:"true"`
	Y float64 `json:"y" required:"true"`
}

// Layout is where the editor drew a workflow's nodes. It is kept beside the
// drafts, never inside a graph document, so moving a node changes no draft
// revision and no checksum.
type Layout struct {
	Key string
	// Positions by node id; nodes without one are laid out automatically.
	Positions map[string]Position
	// UpdatedBy and UpdatedAt are zero for a workflow never laid out.
	UpdatedBy string
	UpdatedAt time.Time
}

// GetLayout returns workflow key's layout: empty positions for a workflow
// never laid out; failure.ErrNotFound for a workflow the tenant lacks.
func (s *Store) GetLayout(ctx context.Context, tenantID, key string) (Layout, error) {
	l := Layout{Key: key}
	var raw []byte
	var by *string
	var at *time.Time
	err := s.Pool.QueryRow(ctx, `SELECT l.positions, l.updated_by, l.updated_at
		FROM workflows w LEFT JOIN workflow_layouts l ON l.tenant_id = w.tenant_id AND l.key = w.key
		WHERE w.tenant_id = $1 AND w.key = $2`, tenantID, key).Scan(&raw, &by, &at)
	if err != nil {
		return Layout{}, notFound(err)
	}
	l.Positions = map[string]Position{}
	if raw != nil {
		if err := json.Unmarshal(raw, &l.Positions); err != nil {
			return Layout{}, fmt.Errorf("store: layout of %q: %w", key, err)
		}
	}
	if by != nil {
		l.UpdatedBy = *by
	}
	if at != nil {
		l.UpdatedAt = *at
	}
	return l, nil
}

// ValidateLayout refuses positions a layout cannot hold with INVALID_REQUEST
// naming the field: too many, an empty or overlong node id, a coordinate
// that is not finite or is out of bounds.
func ValidateLayout(positions map[string]Position) error {
	if max := graph.DefaultLimits.MaxNodes; len(positions) > max {
		return failure.New(failure.CodeInvalidRequest, "a layout holds at most %d positions, got %d", max, len(positions)).
			WithDetails(map[string]any{"field": "positions"})
	}
	for id, p := range positions {
		if id == "" || len(id) > MaxLayoutNodeID {
			return failure.New(failure.CodeInvalidRequest, "a layout node id must be 1 to %d bytes", MaxLayoutNodeID).
				WithDetails(map[string]any{"field": "positions"})
		}
		for _, v := range []float64{p.X, p.Y} {
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > MaxLayoutCoordinate {
				return failure.New(failure.CodeInvalidRequest, "the position of node %q must have x and y within ±%g", id, MaxLayoutCoordinate).
					WithDetails(map[string]any{"field": "positions." + id})
			}
		}
	}
	return nil
}

// SetLayout replaces workflow l.Key's layout with l.Positions as l.UpdatedBy
// and returns it as stored. It touches no draft. A workflow the tenant
// lacks is failure.ErrNotFound.
func (s *Store) SetLayout(ctx context.Context, tenantID string, l Layout) (Layout, error) {
	if err := ValidateLayout(l.Positions); err != nil {
		return Layout{}, err
	}
	if l.UpdatedBy == "" {
		return Layout{}, failure.New(failure.CodeInvalidRequest, "a layout needs who saved it")
	}
	if l.Positions == nil {
		l.Positions = map[string]Position{}
	}
	raw, err := json.Marshal(l.Positions)
	if err != nil {
		return Layout{}, fmt.Errorf("store: encode layout: %w", err)
	}
	err = s.Pool.QueryRow(ctx, `INSERT INTO workflow_layouts (tenant_id, key, positions, updated_by, updated_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (tenant_id, key) DO UPDATE SET
			positions = EXCLUDED.positions, updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at
		RETURNING updated_at`, tenantID, l.Key, raw, l.UpdatedBy).Scan(&l.UpdatedAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: no such workflow
		return Layout{}, failure.ErrNotFound
	}
	if err != nil {
		return Layout{}, fmt.Errorf("store: set layout: %w", err)
	}
	return l, nil
}
