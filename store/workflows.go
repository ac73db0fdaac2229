package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// Workflow is one workflow key of a tenant and where its drafts and
// publications stand.
type Workflow struct {
	Key       string
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
	// LatestDraftRevision is the newest draft revision (always >= 1).
	LatestDraftRevision int
	// LatestPublishedRevision is the newest published revision, 0 before
	// the first publication; LatestChecksum is its checksum ("" when 0).
	LatestPublishedRevision int
	LatestChecksum          string
}

// Draft is one saved draft revision. Document is the graph JSON as stored.
type Draft struct {
	Key      string
	Revision int
	Document json.RawMessage
	SavedBy  string
	SavedAt  time.Time
}

// Revision is one immutable published revision of a workflow.
type Revision struct {
	Key           string
	Revision      int
	Checksum      string
	DraftRevision int
	PublishedBy   string
	PublishedAt   time.Time
}

// CreateWorkflow creates workflow key with doc as draft revision 1, in one
// transaction. A key already used in the tenant is ALREADY_EXISTS.
func (s *Store) CreateWorkflow(ctx context.Context, tenantID, key string, doc json.RawMessage, by string) (Workflow, error) {
	var w Workflow
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO workflows (tenant_id, key, created_by, latest_draft_revision)
			VALUES ($1, $2, $3, 1)
			RETURNING key, created_by, created_at, updated_at, latest_draft_revision, latest_published_revision`,
			tenantID, key, by).
			Scan(&w.Key, &w.CreatedBy, &w.CreatedAt, &w.UpdatedAt, &w.LatestDraftRevision, &w.LatestPublishedRevision)
		if isUniqueViolation(err) {
			return failure.New(failure.CodeAlreadyExists, "workflow %q already exists", key).
				WithDetails(map[string]any{"key": key})
		}
		if err != nil {
			return err
		}
		return insertDraft(ctx, tx, tenantID, key, 1, doc, by)
	})
	if err != nil {
		return Workflow{}, fmt.Errorf("store: create workflow: %w", err)
	}
	return w, nil
}

// insertDraft stores one draft revision. Documents PostgreSQL cannot hold as
// jsonb (a \u0000 escape, a lone surrogate, a number beyond numeric's
// range, extreme nesting) are the
// client's problem, not a server fault, so they come back as INVALID_DOCUMENT.
func insertDraft(ctx context.Context, tx pgx.Tx, tenantID, key string, revision int, doc json.RawMessage, by string) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO workflow_drafts (tenant_id, key, revision, document, saved_by)
		VALUES ($1, $2, $3, $4, $5)`,
		tenantID, key, revision, doc, by)
	if isUnstorableJSON(err) {
		return failure.Wrap(err, failure.CodeInvalidDocument, "the document cannot be stored: %s", pgMessage(err))
	}
	return err
}

// isUnstorableJSON reports PostgreSQL refusing a jsonb value that Go's JSON
// parser accepted.
func isUnstorableJSON(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "22P02", // invalid_text_representation: e.g. a lone surrogate escape
		"22P05", // untranslatable_character: \u0000
		"22003", // numeric_value_out_of_range: e.g. 1e999999
		"54001": // statement_too_complex: nesting beyond the stack depth
		return true
	}
	return false
}

func pgMessage(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	return "invalid JSON"
}

// workflowColumns selects a Workflow; the join supplies the latest
// published checksum.
const workflowColumns = `
	w.key, w.created_by, w.created_at, w.updated_at, w.latest_draft_revision,
	w.latest_published_revision, COALESCE(r.checksum, '')
	FROM workflows w
	LEFT JOIN workflow_revisions r
	  ON r.tenant_id = w.tenant_id AND r.key = w.key AND r.revision = w.latest_published_revision`

func scanWorkflow(row pgx.Row) (Workflow, error) {
	var w Workflow
	err := row.Scan(&w.Key, &w.CreatedBy, &w.CreatedAt, &w.UpdatedAt, &w.LatestDraftRevision,
		&w.LatestPublishedRevision, &w.LatestChecksum)
	return w, err
}

// GetWorkflow returns workflow key of the tenant, or failure.ErrNotFound.
func (s *Store) GetWorkflow(ctx context.Context, tenantID, key string) (Workflow, error) {
	w, err := scanWorkflow(s.Pool.QueryRow(ctx, `SELECT `+workflowColumns+`
		WHERE w.tenant_id = $1 AND w.key = $2`, tenantID, key))
	if err != nil {
		return Workflow{}, fmt.Errorf("store: get workflow %q: %w", key, notFound(err))
	}
	return w, nil
}

// ListWorkflows returns up to limit workflows of the tenant with keys
// greater than after, in key order. next is the key to pass as after for
// the following page, or "" when this page is the last.
func (s *Store) ListWorkflows(ctx context.Context, tenantID, after string, limit int) (items []Workflow, next string, err error) {
	if limit < 1 {
		return nil, "", errors.New("store: list workflows: limit must be positive")
	}
	// One extra row tells whether another page exists without a count query.
	rows, err := s.Pool.Query(ctx, `SELECT `+workflowColumns+`
		WHERE w.tenant_id = $1 AND w.key > $2
		ORDER BY w.key
		LIMIT $3`, tenantID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("store: list workflows: %w", err)
	}
	items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Workflow, error) { return scanWorkflow(r) })
	if err != nil {
		return nil, "", fmt.Errorf("store: list workflows: %w", err)
	}
	if len(items) > limit {
		items = items[:limit]
		next = items[limit-1].Key
	}
	return items, next, nil
}

// SaveDraft stores doc as the next draft revision of workflow key, provided
// the latest draft revision still equals expectedRevision. The check and the
// bump are one conditional UPDATE in the same transaction as the insert, so
// of many concurrent saves with the same expectedRevision exactly one wins;
// the others get REVISION_CONFLICT (details: expectedRevision,
// currentRevision) and nothing is overwritten. It returns the new revision.
func (s *Store) SaveDraft(ctx context.Context, tenantID, key string, expectedRevision int, doc json.RawMessage, by string) (int, error) {
	var revision int
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			UPDATE workflows
			SET latest_draft_revision = latest_draft_revision + 1, updated_at = now()
			WHERE tenant_id = $1 AND key = $2 AND latest_draft_revision = $3
			RETURNING latest_draft_revision`,
			tenantID, key, expectedRevision).Scan(&revision)
		if errors.Is(err, pgx.ErrNoRows) {
			return draftConflict(ctx, tx, tenantID, key, expectedRevision)
		}
		if err != nil {
			return err
		}
		return insertDraft(ctx, tx, tenantID, key, revision, doc, by)
	})
	if err != nil {
		return 0, fmt.Errorf("store: save draft of %q: %w", key, err)
	}
	return revision, nil
}

// draftConflict explains why a conditional update matched no row: the
// workflow does not exist (ErrNotFound) or its draft moved on (REVISION_CONFLICT).
func draftConflict(ctx context.Context, tx pgx.Tx, tenantID, key string, expected int) error {
	var current int
	err := tx.QueryRow(ctx, `SELECT latest_draft_revision FROM workflows WHERE tenant_id = $1 AND key = $2`,
		tenantID, key).Scan(&current)
	if err != nil {
		return notFound(err)
	}
	return RevisionConflict(expected, current)
}

// RevisionConflict is the REVISION_CONFLICT error for a client that edited
// draft revision expected while the latest is current.
func RevisionConflict(expected, current int) *failure.Error {
	return failure.New(failure.CodeRevisionConflict,
		"expected draft revision %d but the latest is %d; reload and retry", expected, current).
		WithDetails(map[string]any{"expectedRevision": expected, "currentRevision": current})
}

// GetDraft returns draft revision of workflow key, or failure.ErrNotFound.
func (s *Store) GetDraft(ctx context.Context, tenantID, key string, revision int) (Draft, error) {
	d := Draft{Key: key, Revision: revision}
	err := s.Pool.QueryRow(ctx, `
		SELECT document, saved_by, saved_at FROM workflow_drafts
		WHERE tenant_id = $1 AND key = $2 AND revision = $3`,
		tenantID, key, revision).Scan(&d.Document, &d.SavedBy, &d.SavedAt)
	if err != nil {
		return Draft{}, fmt.Errorf("store: get draft %d of %q: %w", revision, key, notFound(err))
	}
	return d, nil
}

// Publish records compiled (with its execution plan p) as the next
// published revision of workflow key, made from draftRevision by by. In one
// transaction that holds the workflow row lock it:
//
//   - refuses with REVISION_CONFLICT unless draftRevision is still the
//     latest draft (the client published what it last saw);
//   - returns the latest published revision unchanged, with created false,
//     when its checksum equals compiled.Checksum: publishing the same
//     content twice (a retry, a double click, a draft edited back) never
//     makes a duplicate revision. An older revision with the same checksum
//     does not count: going back to earlier content is a new revision;
//   - otherwise stores the compiled revision (content-addressed, shared,
//     ON CONFLICT DO NOTHING), inserts revision latest+1 and bumps the
//     workflow's latest published revision, with created true.
func (s *Store) Publish(ctx context.Context, tenantID, key string, draftRevision int, compiled *graph.Compiled, p *graph.Plan, by string) (rev Revision, created bool, err error) {
	if compiled == nil || p == nil || compiled.Checksum == "" {
		return Revision{}, false, errors.New("store: publish: compiled revision, plan and checksum are required")
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var latestDraft, latestPublished int
		var latestChecksum string
		err := tx.QueryRow(ctx, `
			SELECT w.latest_draft_revision, w.latest_published_revision, COALESCE(r.checksum, '')
			FROM workflows w
			LEFT JOIN workflow_revisions r
			  ON r.tenant_id = w.tenant_id AND r.key = w.key AND r.revision = w.latest_published_revision
			WHERE w.tenant_id = $1 AND w.key = $2
			FOR UPDATE OF w`, tenantID, key).Scan(&latestDraft, &latestPublished, &latestChecksum)
		if err != nil {
			return notFound(err)
		}
		if latestDraft != draftRevision {
			return RevisionConflict(draftRevision, latestDraft)
		}
		if latestPublished > 0 && latestChecksum == compiled.Checksum {
			rev, err = getRevision(ctx, tx, tenantID, key, latestPublished)
			return err
		}
		if err := putCompiled(ctx, tx, tenantID, compiled, p); err != nil {
			return err
		}
		rev = Revision{Key: key, Revision: latestPublished + 1, Checksum: compiled.Checksum,
			DraftRevision: draftRevision, PublishedBy: by}
		if err := tx.QueryRow(ctx, `
			INSERT INTO workflow_revisions (tenant_id, key, revision, checksum, draft_revision, published_by)
			VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING published_at`,
			tenantID, key, rev.Revision, rev.Checksum, draftRevision, by).Scan(&rev.PublishedAt); err != nil {
			return err
		}
		created = true
		_, err = tx.Exec(ctx, `
			UPDATE workflows SET latest_published_revision = $3, updated_at = now()
			WHERE tenant_id = $1 AND key = $2`, tenantID, key, rev.Revision)
		return err
	})
	if err != nil {
		return Revision{}, false, fmt.Errorf("store: publish %q: %w", key, err)
	}
	return rev, created, nil
}

// GetRevision returns published revision of workflow key, or failure.ErrNotFound.
func (s *Store) GetRevision(ctx context.Context, tenantID, key string, revision int) (Revision, error) {
	r, err := getRevision(ctx, s.Pool, tenantID, key, revision)
	if err != nil {
		return Revision{}, fmt.Errorf("store: get revision %d of %q: %w", revision, key, err)
	}
	return r, nil
}

// LatestRevision returns the newest published revision of workflow key, or
// failure.ErrNotFound when the workflow is missing or was never published.
func (s *Store) LatestRevision(ctx context.Context, tenantID, key string) (Revision, error) {
	var n int
	err := s.Pool.QueryRow(ctx, `
		SELECT latest_published_revision FROM workflows WHERE tenant_id = $1 AND key = $2`,
		tenantID, key).Scan(&n)
	if err == nil && n == 0 {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return Revision{}, fmt.Errorf("store: latest revision of %q: %w", key, notFound(err))
	}
	return s.GetRevision(ctx, tenantID, key, n)
}

// querier is what a pool and a transaction have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func getRevision(ctx context.Context, q querier, tenantID, key string, revision int) (Revision, error) {
	r := Revision{Key: key, Revision: revision}
	err := q.QueryRow(ctx, `
		SELECT checksum, draft_revision, published_by, published_at FROM workflow_revisions
		WHERE tenant_id = $1 AND key = $2 AND revision = $3`,
		tenantID, key, revision).Scan(&r.Checksum, &r.DraftRevision, &r.PublishedBy, &r.PublishedAt)
	if err != nil {
		return Revision{}, notFound(err)
	}
	return r, nil
}

// PutCompiled stores a compiled revision and its plan under (tenant,
// checksum). It is idempotent: the checksum covers the content, so an
// existing row already holds the same revision and is left as it is.
// Publication uses it, and so will simulated drafts, which are compiled
// and stored without being published.
func (s *Store) PutCompiled(ctx context.Context, tenantID string, c *graph.Compiled, p *graph.Plan) error {
	if err := putCompiled(ctx, s.Pool, tenantID, c, p); err != nil {
		return fmt.Errorf("store: put compiled: %w", err)
	}
	return nil
}

func putCompiled(ctx context.Context, q querier, tenantID string, c *graph.Compiled, p *graph.Plan) error {
	if c == nil || p == nil || c.Checksum == "" {
		return errors.New("compiled revision, plan and checksum are required")
	}
	if p.Checksum != c.Checksum {
		return fmt.Errorf("plan checksum %q does not match compiled checksum %q", p.Checksum, c.Checksum)
	}
	compiled, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode compiled revision: %w", err)
	}
	plan, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	_, err = q.Exec(ctx, `
		INSERT INTO compiled_revisions (tenant_id, checksum, compiled, plan)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant_id, checksum) DO NOTHING`,
		tenantID, c.Checksum, compiled, plan)
	return err
}

// GetCompiled returns the compiled revision stored under (tenant, checksum),
// or failure.ErrNotFound.
func (s *Store) GetCompiled(ctx context.Context, tenantID, checksum string) (*graph.Compiled, error) {
	var raw []byte
	err := s.Pool.QueryRow(ctx, `SELECT compiled FROM compiled_revisions WHERE tenant_id = $1 AND checksum = $2`,
		tenantID, checksum).Scan(&raw)
	if err != nil {
		return nil, fmt.Errorf("store: get compiled %s: %w", checksum, notFound(err))
	}
	var c graph.Compiled
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("store: decode compiled %s: %w", checksum, err)
	}
	return &c, nil
}

// GetPlan returns the execution plan stored under (tenant, checksum), or
// failure.ErrNotFound. The interpreter loads only this, never the node bodies.
func (s *Store) GetPlan(ctx context.Context, tenantID, checksum string) (*graph.Plan, error) {
	var raw []byte
	err := s.Pool.QueryRow(ctx, `SELECT plan FROM compiled_revisions WHERE tenant_id = $1 AND checksum = $2`,
		tenantID, checksum).Scan(&raw)
	if err != nil {
		return nil, fmt.Errorf("store: get plan %s: %w", checksum, notFound(err))
	}
	var p graph.Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("store: decode plan %s: %w", checksum, err)
	}
	return &p, nil
}
