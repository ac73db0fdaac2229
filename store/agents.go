package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// CodeAgentArchived refuses a new revision of an archived agent.
const CodeAgentArchived = "AGENT_ARCHIVED"

// Agent is one agent of a tenant and where its revisions stand.
type Agent struct {
	Key            string
	Name           string
	Description    string
	LatestRevision int
	CreatedBy      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// ArchivedAt is set once the agent is archived (hidden from new publications).
	ArchivedAt *time.Time
	ArchivedBy string
}

// Archived reports whether the agent is archived.
func (a Agent) Archived() bool { return a.ArchivedAt != nil }

// AgentRevision is one immutable revision of an agent.
type AgentRevision struct {
	Key      string
	Revision int
	// Content is the normalized definition (agents.Definition) as JSON.
	Content   json.RawMessage
	Hash      string
	CreatedBy string
	CreatedAt time.Time
}

const agentColumns = `key, name, description, latest_revision, created_by, created_at, updated_at, archived_at, COALESCE(archived_by, '')`

func scanAgent(row pgx.Row) (Agent, error) {
	var a Agent
	err := row.Scan(&a.Key, &a.Name, &a.Description, &a.LatestRevision, &a.CreatedBy, &a.CreatedAt, &a.UpdatedAt,
		&a.ArchivedAt, &a.ArchivedBy)
	return a, err
}

const agentRevisionColumns = `key, revision, content, hash, created_by, created_at`

func scanAgentRevision(row pgx.Row) (AgentRevision, error) {
	var r AgentRevision
	err := row.Scan(&r.Key, &r.Revision, &r.Content, &r.Hash, &r.CreatedBy, &r.CreatedAt)
	return r, err
}

// NewAgent is what CreateAgent stores.
type NewAgent struct {
	Key         string
	Name        string
	Description string
	// Content and Hash are revision 1: the normalized definition and its
	// content hash (agents.Definition.Hash).
	Content json.RawMessage
	Hash    string
	By      string
}

// CreateAgent creates agent key with revision 1 in one transaction. A key
// already used in the tenant is ALREADY_EXISTS (archived agents keep their key).
func (s *Store) CreateAgent(ctx context.Context, tenantID string, n NewAgent) (Agent, AgentRevision, error) {
	if tenantID == "" || n.Key == "" || n.Hash == "" || !json.Valid(n.Content) {
		return Agent{}, AgentRevision{}, failure.New(failure.CodeInvalidRequest, "tenant, key, content and hash are required")
	}
	var a Agent
	var r AgentRevision
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var err error
		a, err = scanAgent(tx.QueryRow(ctx, `INSERT INTO agents (tenant_id, key, name, description, latest_revision, created_by)
			VALUES ($1, $2, $3, $4, 1, $5) RETURNING `+agentColumns, tenantID, n.Key, n.Name, n.Description, n.By))
		if isUniqueViolation(err) {
			return failure.New(failure.CodeAlreadyExists, "agent %q already exists", n.Key).
				WithDetails(map[string]any{"key": n.Key})
		}
		if err != nil {
			return err
		}
		r, err = insertAgentRevision(ctx, tx, tenantID, n.Key, 1, n.Content, n.Hash, n.By)
		return err
	})
	if err != nil {
		return Agent{}, AgentRevision{}, fmt.Errorf("store: create agent: %w", err)
	}
	return a, r, nil
}

func insertAgentRevision(ctx context.Context, tx pgx.Tx, tenantID, key string, revision int, content json.RawMessage, hash, by string) (AgentRevision, error) {
	r, err := scanAgentRevision(tx.QueryRow(ctx, `INSERT INTO agent_revisions (tenant_id, key, revision, content, hash, created_by)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+agentRevisionColumns, tenantID, key, revision, []byte(content), hash, by))
	if isUnstorableJSON(err) {
		return AgentRevision{}, failure.Wrap(err, failure.CodeInvalidRequest, "the agent definition cannot be stored: %s", pgMessage(err))
	}
	return r, err
}

// AgentUpdate is what AddAgentRevision stores.
type AgentUpdate struct {
	// ExpectedRevision, when positive, must still be the latest revision
	// (else REVISION_CONFLICT); 0 appends after whatever is latest.
	ExpectedRevision int
	// Name and Description, when non-nil, replace the agent's.
	Name        *string
	Description *string
	Content     json.RawMessage
	Hash        string
	By          string
}

// AddAgentRevision stores the next immutable revision of agent key. A
// missing agent (or another tenant's) is failure.ErrNotFound, an archived one
// AGENT_ARCHIVED, a stale ExpectedRevision REVISION_CONFLICT.
func (s *Store) AddAgentRevision(ctx context.Context, tenantID, key string, u AgentUpdate) (Agent, AgentRevision, error) {
	if u.Hash == "" || !json.Valid(u.Content) {
		return Agent{}, AgentRevision{}, failure.New(failure.CodeInvalidRequest, "content and hash are required")
	}
	var a Agent
	var r AgentRevision
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		cur, err := scanAgent(tx.QueryRow(ctx, `SELECT `+agentColumns+` FROM agents
			WHERE tenant_id = $1 AND key = $2 FOR UPDATE`, tenantID, key))
		if err != nil {
			return notFound(err)
		}
		switch {
		case cur.Archived():
			return failure.New(CodeAgentArchived, "agent %q is archived; it takes no new revisions", key).
				WithDetails(map[string]any{"key": key})
		case u.ExpectedRevision > 0 && u.ExpectedRevision != cur.LatestRevision:
			return RevisionConflict(u.ExpectedRevision, cur.LatestRevision)
		}
		next := cur.LatestRevision + 1
		a, err = scanAgent(tx.QueryRow(ctx, `UPDATE agents SET latest_revision = $3,
				name = COALESCE($4, name), description = COALESCE($5, description), updated_at = now()
			WHERE tenant_id = $1 AND key = $2 RETURNING `+agentColumns, tenantID, key, next, u.Name, u.Description))
		if err != nil {
			return err
		}
		r, err = insertAgentRevision(ctx, tx, tenantID, key, next, u.Content, u.Hash, u.By)
		return err
	})
	if err != nil {
		return Agent{}, AgentRevision{}, fmt.Errorf("store: add agent revision: %w", err)
	}
	return a, r, nil
}

// GetAgent returns agent key of the tenant, or failure.ErrNotFound.
func (s *Store) GetAgent(ctx context.Context, tenantID, key string) (Agent, error) {
	a, err := scanAgent(s.Pool.QueryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE tenant_id = $1 AND key = $2`, tenantID, key))
	if err != nil {
		return Agent{}, fmt.Errorf("store: get agent %q: %w", key, notFound(err))
	}
	return a, nil
}

// GetAgentRevision returns one revision of agent key, archived or not, or
// failure.ErrNotFound.
func (s *Store) GetAgentRevision(ctx context.Context, tenantID, key string, revision int) (AgentRevision, error) {
	r, err := scanAgentRevision(s.Pool.QueryRow(ctx, `SELECT `+agentRevisionColumns+` FROM agent_revisions
		WHERE tenant_id = $1 AND key = $2 AND revision = $3`, tenantID, key, revision))
	if err != nil {
		return AgentRevision{}, fmt.Errorf("store: get agent revision %s@%d: %w", key, revision, notFound(err))
	}
	return r, nil
}

// AgentRevisionSummary is a revision without its content.
type AgentRevisionSummary struct {
	Revision  int
	Hash      string
	CreatedBy string
	CreatedAt time.Time
}

// ListAgentRevisions returns every revision of agent key, newest first
// (without content; at most maxAgentRevisionsListed).
func (s *Store) ListAgentRevisions(ctx context.Context, tenantID, key string) ([]AgentRevisionSummary, error) {
	rows, err := s.Pool.Query(ctx, `SELECT revision, hash, created_by, created_at FROM agent_revisions
		WHERE tenant_id = $1 AND key = $2 ORDER BY revision DESC LIMIT $3`, tenantID, key, maxAgentRevisionsListed)
	if err != nil {
		return nil, fmt.Errorf("store: list agent revisions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AgentRevisionSummary, error) {
		var v AgentRevisionSummary
		err := r.Scan(&v.Revision, &v.Hash, &v.CreatedBy, &v.CreatedAt)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list agent revisions: %w", err)
	}
	return out, nil
}

const maxAgentRevisionsListed = 1000

// ListAgents returns up to limit agents of the tenant (archived included)
// with keys greater than after, in key order; next is the key to pass as
// after for the following page, or "" on the last page.
func (s *Store) ListAgents(ctx context.Context, tenantID, after string, limit int) (items []Agent, next string, err error) {
	if limit < 1 {
		return nil, "", errors.New("store: list agents: limit must be positive")
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+agentColumns+` FROM agents
		WHERE tenant_id = $1 AND key > $2 ORDER BY key LIMIT $3`, tenantID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("store: list agents: %w", err)
	}
	items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Agent, error) { return scanAgent(r) })
	if err != nil {
		return nil, "", fmt.Errorf("store: list agents: %w", err)
	}
	if len(items) > limit {
		items = items[:limit]
		next = items[limit-1].Key
	}
	return items, next, nil
}

// ArchiveAgent archives agent key (idempotent: an archived agent keeps its
// first archival). New publications no longer resolve its revisions;
// published revisions keep running.
func (s *Store) ArchiveAgent(ctx context.Context, tenantID, key, by string) (Agent, error) {
	a, err := scanAgent(s.Pool.QueryRow(ctx, `UPDATE agents
		SET archived_at = COALESCE(archived_at, now()), archived_by = COALESCE(archived_by, $3),
			updated_at = CASE WHEN archived_at IS NULL THEN now() ELSE updated_at END
		WHERE tenant_id = $1 AND key = $2 RETURNING `+agentColumns, tenantID, key, by))
	if err != nil {
		return Agent{}, fmt.Errorf("store: archive agent %q: %w", key, notFound(err))
	}
	return a, nil
}

// AgentName implements variables.AgentLookup: the display name of agent
// key in the tenant (archived agents included), or failure.ErrNotFound
// (which is variables.ErrRecordNotFound) for a key of no agent of the tenant.
func (s *Store) AgentName(ctx context.Context, tenantID, agentKey string) (string, error) {
	var name string
	err := s.Pool.QueryRow(ctx, `SELECT name FROM agents WHERE tenant_id = $1 AND key = $2`, tenantID, agentKey).Scan(&name)
	if err != nil {
		return "", fmt.Errorf("store: agent %q: %w", agentKey, notFound(err))
	}
	return name, nil
}

// agentContractContent is the part of a stored definition publication pins.
type agentContractContent struct {
	OutputSchema json.RawMessage  `json:"outputSchema"`
	AllowedTools []string         `json:"allowedTools"`
	Instructions string           `json:"instructions"`
	Skills       []graph.SkillRef `json:"skills"`
}

// AgentContracts implements publication.AgentSource: the contracts of those refs
// that exist in the tenant, archived ones marked Archived (validation then
// refuses them as MISSING_DEPENDENCY), with their instructions template and
// the skills they list (unpinned: SkillContracts resolves them).
// The store sets no RequiredPermissions: its tools are filtered by the run's
// permission snapshot when it runs (a withheld tool is tool.denied), and
// the scopes of its instructions' variables are added by the resolver,
// which holds the variable registry.
func (s *Store) AgentContracts(ctx context.Context, tenantID string, refs []graph.AgentRef) ([]graph.AgentContract, error) {
	if len(refs) == 0 {
		return []graph.AgentContract{}, nil
	}
	keys := make([]string, len(refs))
	revs := make([]int32, len(refs))
	for i, r := range refs {
		keys[i], revs[i] = r.Key, int32(min(max(r.Revision, 0), 1<<31-1))
	}
	rows, err := s.Pool.Query(ctx, `SELECT r.key, r.revision, r.content, r.hash, a.archived_at IS NOT NULL
		FROM unnest($2::text[], $3::int[]) AS want(key, revision)
		JOIN agent_revisions r ON r.tenant_id = $1 AND r.key = want.key AND r.revision = want.revision
		JOIN agents a ON a.tenant_id = r.tenant_id AND a.key = r.key
		ORDER BY r.key, r.revision`, tenantID, keys, revs)
	if err != nil {
		return nil, fmt.Errorf("store: agent contracts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (graph.AgentContract, error) {
		var c graph.AgentContract
		var content []byte
		if err := row.Scan(&c.Key, &c.Revision, &content, &c.Hash, &c.Archived); err != nil {
			return c, err
		}
		var body agentContractContent
		if err := json.Unmarshal(content, &body); err != nil {
			return c, fmt.Errorf("agent %s@%d content: %w", c.Key, c.Revision, err)
		}
		c.OutputSchema, c.AllowedTools, c.RequiredPermissions = body.OutputSchema, body.AllowedTools, []string{}
		c.Instructions = body.Instructions
		for _, sk := range body.Skills {
			// Validation resolves each one and pins its content hash.
			c.Skills = append(c.Skills, graph.PinnedSkill{Key: sk.Key, Revision: sk.Revision})
		}
		if c.AllowedTools == nil {
			c.AllowedTools = []string{}
		}
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: agent contracts: %w", err)
	}
	return slices.CompactFunc(out, func(a, b graph.AgentContract) bool { return a.Key == b.Key && a.Revision == b.Revision }), nil
}
