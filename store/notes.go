package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// NotesTool is the ledger tool name of workspace.notes.write@1.
const NotesTool = "workspace.notes.write@1"

// Note is one note written by workspace.notes.write@1, with the run and node
// that wrote it and who acted.
type Note struct {
	NoteID   string
	TenantID string
	RunID    string
	NodeID   string
	// Actor is who the run acted for (for a schedule's or webhook's run the
	// service actor naming it, with configuredBy); RequestedBy is the user
	// behind it. Nil and "" for a note whose run was gone when the actor
	// was first recorded (migration 00007).
	Actor       *execution.Actor
	RequestedBy string
	Title       string
	Body        json.RawMessage
	CreatedAt   time.Time
}

// NoteCursor is a keyset position in the notes list, ordered by
// (CreatedAt, NoteID) descending.
type NoteCursor struct {
	CreatedAt time.Time
	NoteID    string
}

// Cursor returns the keyset position just after n, for the next page.
func (n Note) Cursor() NoteCursor { return NoteCursor{CreatedAt: n.CreatedAt, NoteID: n.NoteID} }

// WriteNoteOnce writes a note exactly once per ledger key: in one
// transaction it claims (tenant, NotesTool, ledgerKey) in action_ledger bound
// to inputHash, then inserts the note. A key already claimed with the same
// input hash returns the first note's id without writing again (a retried or
// replayed attempt); with another input hash it fails closed with
// IDEMPOTENCY_CONFLICT (errors.Is(err, ErrLedgerConflict)). The note records
// author, the actor the run acts for, and its RequestedBy.
func (s *Store) WriteNoteOnce(ctx context.Context, tenantID, runID, nodeID, ledgerKey, inputHash, title string, body json.RawMessage, author execution.Actor) (noteID string, err error) {
	if tenantID == "" || ledgerKey == "" || inputHash == "" {
		return "", failure.New(failure.CodeInvalidRequest, "tenant, ledger key and input hash are required")
	}
	if !json.Valid(body) {
		return "", failure.New(failure.CodeInvalidRequest, "note body is not valid JSON")
	}
	id, err := uuid.NewV7() // time-ordered, so notes sort by creation within a page
	if err != nil {
		return "", err
	}
	candidate := id.String()
	result, err := json.Marshal(map[string]string{"noteId": candidate})
	if err != nil {
		return "", err
	}
	actor, err := json.Marshal(author)
	if err != nil {
		return "", err
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		first, err := claimLedger(ctx, tx, tenantID, NotesTool, ledgerKey, inputHash, result)
		if err != nil {
			return err
		}
		if first != nil {
			var r struct {
				NoteID string `json:"noteId"`
			}
			if err := json.Unmarshal(first, &r); err != nil || r.NoteID == "" {
				return fmt.Errorf("ledger result of %s is not a note: %s", ledgerKey, first)
			}
			noteID = r.NoteID
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO notes (note_id, tenant_id, run_id, node_id, title, body, actor, requested_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, candidate, tenantID, runID, nodeID, title, []byte(body),
			actor, author.RequestedBy())
		if isUnstorableJSON(err) {
			return failure.Wrap(err, failure.CodeInvalidRequest, "note body cannot be stored: %s", pgMessage(err))
		}
		noteID = candidate
		return err
	})
	if err != nil {
		return "", fmt.Errorf("store: write note: %w", err)
	}
	return noteID, nil
}

// Page sizes of ListNotes.
const (
	DefaultNotePageSize = 50
	MaxNotePageSize     = 1000
)

// ListNotes returns the tenant's notes, newest first, one keyset page at a
// time (before nil is the first page).
func (s *Store) ListNotes(ctx context.Context, tenantID string, limit int, before *NoteCursor) ([]Note, error) {
	if limit <= 0 {
		limit = DefaultNotePageSize
	}
	limit = min(limit, MaxNotePageSize)
	var beforeAt *time.Time
	var beforeID *string
	if before != nil {
		beforeAt, beforeID = &before.CreatedAt, &before.NoteID
	}
	rows, err := s.Pool.Query(ctx, `SELECT note_id, tenant_id, run_id, node_id, title, body, created_at,
		actor, COALESCE(requested_by, '') FROM notes
		WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, note_id) < ($2, $3::text))
		ORDER BY created_at DESC, note_id DESC
		LIMIT $4`, tenantID, beforeAt, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list notes: %w", err)
	}
	notes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Note, error) {
		var n Note
		var actor []byte
		if err := r.Scan(&n.NoteID, &n.TenantID, &n.RunID, &n.NodeID, &n.Title, &n.Body, &n.CreatedAt,
			&actor, &n.RequestedBy); err != nil {
			return n, err
		}
		if len(actor) > 0 {
			n.Actor = &execution.Actor{}
			if err := json.Unmarshal(actor, n.Actor); err != nil {
				return n, fmt.Errorf("note %s actor: %w", n.NoteID, err)
			}
		}
		return n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list notes: %w", err)
	}
	return notes, nil
}
