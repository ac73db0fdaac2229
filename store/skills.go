package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// CodeSkillArchived refuses a new revision of an archived skill.
const CodeSkillArchived = "SKILL_ARCHIVED"

// Skill is one tenant skill and where its revisions stand.
type Skill struct {
	Key string
	// Name is the latest revision's name.
	Name           string
	LatestRevision int
	CreatedBy      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// ArchivedAt is set once the skill is archived (hidden from new publications).
	ArchivedAt *time.Time
	ArchivedBy string
}

// Archived reports whether the skill is archived.
func (s Skill) Archived() bool { return s.ArchivedAt != nil }

// SkillRevision is one immutable revision of a skill.
type SkillRevision struct {
	Key       string
	Revision  int
	Name      string
	Text      string
	Hash      string
	CreatedBy string
	CreatedAt time.Time
}

const skillColumns = `key, name, latest_revision, created_by, created_at, updated_at, archived_at, COALESCE(archived_by, '')`

func scanSkill(row pgx.Row) (Skill, error) {
	var s Skill
	err := row.Scan(&s.Key, &s.Name, &s.LatestRevision, &s.CreatedBy, &s.CreatedAt, &s.UpdatedAt, &s.ArchivedAt, &s.ArchivedBy)
	return s, err
}

const skillRevisionColumns = `key, revision, name, text, hash, created_by, created_at`

func scanSkillRevision(row pgx.Row) (SkillRevision, error) {
	var r SkillRevision
	err := row.Scan(&r.Key, &r.Revision, &r.Name, &r.Text, &r.Hash, &r.CreatedBy, &r.CreatedAt)
	return r, err
}

// NewSkill is what CreateSkill stores: the skill and its revision 1
// (validated and hashed by the caller: agents.Skill).
type NewSkill struct {
	Key  string
	Name string
	Text string
	Hash string
	By   string
}

// CreateSkill creates skill key with revision 1 in one transaction. A key
// already used in the tenant is ALREADY_EXISTS (archived skills keep theirs).
func (s *Store) CreateSkill(ctx context.Context, tenantID string, n NewSkill) (Skill, SkillRevision, error) {
	if tenantID == "" || n.Key == "" || n.Name == "" || n.Hash == "" {
		return Skill{}, SkillRevision{}, failure.New(failure.CodeInvalidRequest, "tenant, key, name and hash are required")
	}
	var sk Skill
	var rev SkillRevision
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var err error
		sk, err = scanSkill(tx.QueryRow(ctx, `INSERT INTO skills (tenant_id, key, name, latest_revision, created_by)
			VALUES ($1, $2, $3, 1, $4) RETURNING `+skillColumns, tenantID, n.Key, n.Name, n.By))
		if isUniqueViolation(err) {
			return failure.New(failure.CodeAlreadyExists, "skill %q already exists", n.Key).
				WithDetails(map[string]any{"key": n.Key})
		}
		if err != nil {
			return err
		}
		rev, err = insertSkillRevision(ctx, tx, tenantID, n.Key, 1, n)
		return err
	})
	if err != nil {
		return Skill{}, SkillRevision{}, fmt.Errorf("store: create skill: %w", err)
	}
	return sk, rev, nil
}

func insertSkillRevision(ctx context.Context, tx pgx.Tx, tenantID, key string, revision int, n NewSkill) (SkillRevision, error) {
	r, err := scanSkillRevision(tx.QueryRow(ctx, `INSERT INTO skill_revisions (tenant_id, key, revision, name, text, hash, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+skillRevisionColumns, tenantID, key, revision, n.Name, n.Text, n.Hash, n.By))
	if isUnstorableJSON(err) {
		return SkillRevision{}, failure.Wrap(err, failure.CodeInvalidRequest, "the skill cannot be stored: %s", pgMessage(err))
	}
	return r, err
}

// SkillUpdate is what AddSkillRevision stores.
type SkillUpdate struct {
	// ExpectedRevision, when positive, must still be the latest revision
	// (else REVISION_CONFLICT); 0 appends after whatever is latest.
	ExpectedRevision int
	Name             string
	Text             string
	Hash             string
	By               string
}

// AddSkillRevision stores the next immutable revision of skill key. A
// missing skill (or another tenant's) is failure.ErrNotFound, an archived
// one SKILL_ARCHIVED, a stale ExpectedRevision REVISION_CONFLICT.
func (s *Store) AddSkillRevision(ctx context.Context, tenantID, key string, u SkillUpdate) (Skill, SkillRevision, error) {
	if u.Name == "" || u.Hash == "" {
		return Skill{}, SkillRevision{}, failure.New(failure.CodeInvalidRequest, "name and hash are required")
	}
	var sk Skill
	var rev SkillRevision
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		cur, err := scanSkill(tx.QueryRow(ctx, `SELECT `+skillColumns+` FROM skills
			WHERE tenant_id = $1 AND key = $2 FOR UPDATE`, tenantID, key))
		if err != nil {
			return notFound(err)
		}
		switch {
		case cur.Archived():
			return failure.New(CodeSkillArchived, "skill %q is archived; it takes no new revisions", key).
				WithDetails(map[string]any{"key": key})
		case u.ExpectedRevision > 0 && u.ExpectedRevision != cur.LatestRevision:
			return RevisionConflict(u.ExpectedRevision, cur.LatestRevision)
		}
		next := cur.LatestRevision + 1
		sk, err = scanSkill(tx.QueryRow(ctx, `UPDATE skills SET latest_revision = $3, name = $4, updated_at = now()
			WHERE tenant_id = $1 AND key = $2 RETURNING `+skillColumns, tenantID, key, next, u.Name))
		if err != nil {
			return err
		}
		rev, err = insertSkillRevision(ctx, tx, tenantID, key, next, NewSkill{Name: u.Name, Text: u.Text, Hash: u.Hash, By: u.By})
		return err
	})
	if err != nil {
		return Skill{}, SkillRevision{}, fmt.Errorf("store: add skill revision: %w", err)
	}
	return sk, rev, nil
}

// GetSkill returns skill key of the tenant, or failure.ErrNotFound.
func (s *Store) GetSkill(ctx context.Context, tenantID, key string) (Skill, error) {
	sk, err := scanSkill(s.Pool.QueryRow(ctx, `SELECT `+skillColumns+` FROM skills WHERE tenant_id = $1 AND key = $2`, tenantID, key))
	if err != nil {
		return Skill{}, fmt.Errorf("store: get skill %q: %w", key, notFound(err))
	}
	return sk, nil
}

// GetSkillRevision returns one revision of skill key, archived or not, or
// failure.ErrNotFound.
func (s *Store) GetSkillRevision(ctx context.Context, tenantID, key string, revision int) (SkillRevision, error) {
	r, err := scanSkillRevision(s.Pool.QueryRow(ctx, `SELECT `+skillRevisionColumns+` FROM skill_revisions
		WHERE tenant_id = $1 AND key = $2 AND revision = $3`, tenantID, key, revision))
	if err != nil {
		return SkillRevision{}, fmt.Errorf("store: get skill revision %s@%d: %w", key, revision, notFound(err))
	}
	return r, nil
}

// SkillRevisionSummary is a revision without its text.
type SkillRevisionSummary struct {
	Revision  int
	Name      string
	Hash      string
	CreatedBy string
	CreatedAt time.Time
}

// ListSkillRevisions returns the revisions of skill key, newest first
// (without their text; at most maxAgentRevisionsListed).
func (s *Store) ListSkillRevisions(ctx context.Context, tenantID, key string) ([]SkillRevisionSummary, error) {
	rows, err := s.Pool.Query(ctx, `SELECT revision, name, hash, created_by, created_at FROM skill_revisions
		WHERE tenant_id = $1 AND key = $2 ORDER BY revision DESC LIMIT $3`, tenantID, key, maxAgentRevisionsListed)
	if err != nil {
		return nil, fmt.Errorf("store: list skill revisions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SkillRevisionSummary, error) {
		var v SkillRevisionSummary
		err := r.Scan(&v.Revision, &v.Name, &v.Hash, &v.CreatedBy, &v.CreatedAt)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list skill revisions: %w", err)
	}
	return out, nil
}

// ListSkills returns up to limit skills of the tenant (archived included)
// with keys greater than after, in key order; next is the key to pass as
// after for the following page, or "" on the last page.
func (s *Store) ListSkills(ctx context.Context, tenantID, after string, limit int) (items []Skill, next string, err error) {
	if limit < 1 {
		return nil, "", errors.New("store: list skills: limit must be positive")
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+skillColumns+` FROM skills
		WHERE tenant_id = $1 AND key > $2 ORDER BY key LIMIT $3`, tenantID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("store: list skills: %w", err)
	}
	items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Skill, error) { return scanSkill(r) })
	if err != nil {
		return nil, "", fmt.Errorf("store: list skills: %w", err)
	}
	if len(items) > limit {
		items = items[:limit]
		next = items[limit-1].Key
	}
	return items, next, nil
}

// ArchiveSkill archives skill key (idempotent: an archived skill keeps its
// first archival). New publications no longer resolve its revisions;
// published revisions keep appending them.
func (s *Store) ArchiveSkill(ctx context.Context, tenantID, key, by string) (Skill, error) {
	sk, err := scanSkill(s.Pool.QueryRow(ctx, `UPDATE skills
		SET archived_at = COALESCE(archived_at, now()), archived_by = COALESCE(archived_by, $3),
			updated_at = CASE WHEN archived_at IS NULL THEN now() ELSE updated_at END
		WHERE tenant_id = $1 AND key = $2 RETURNING `+skillColumns, tenantID, key, by))
	if err != nil {
		return Skill{}, fmt.Errorf("store: archive skill %q: %w", key, notFound(err))
	}
	return sk, nil
}

// SkillContracts implements publication.SkillSource: the revisions of refs that
// exist in the tenant, archived ones marked Archived (validation then
// refuses them as MISSING_DEPENDENCY).
func (s *Store) SkillContracts(ctx context.Context, tenantID string, refs []graph.SkillRef) ([]graph.SkillContract, error) {
	if len(refs) == 0 {
		return []graph.SkillContract{}, nil
	}
	keys := make([]string, len(refs))
	revs := make([]int32, len(refs))
	for i, r := range refs {
		keys[i], revs[i] = r.Key, int32(min(max(r.Revision, 0), 1<<31-1))
	}
	rows, err := s.Pool.Query(ctx, `SELECT DISTINCT r.key, r.revision, r.hash, s.archived_at IS NOT NULL
		FROM unnest($2::text[], $3::int[]) AS want(key, revision)
		JOIN skill_revisions r ON r.tenant_id = $1 AND r.key = want.key AND r.revision = want.revision
		JOIN skills s ON s.tenant_id = r.tenant_id AND s.key = r.key
		ORDER BY r.key, r.revision`, tenantID, keys, revs)
	if err != nil {
		return nil, fmt.Errorf("store: skill contracts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (graph.SkillContract, error) {
		var c graph.SkillContract
		err := row.Scan(&c.Key, &c.Revision, &c.Hash, &c.Archived)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: skill contracts: %w", err)
	}
	return out, nil
}
