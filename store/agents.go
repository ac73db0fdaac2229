package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// Codes of agent and catalog refusals.
const (
	// CodeAgentArchived refuses a new revision of an archived agent.
	CodeAgentArchived = "AGENT_ARCHIVED"
	// CodeContractChanged refuses a contract published under an id@version
	// that already holds another contract.
	CodeContractChanged = "ACTION_CONTRACT_CHANGED"
	// CodeStaleAttempt refuses a transcript save from an attempt older than
	// the one that saved last (a zombie attempt of a lost worker).
	CodeStaleAttempt = "STALE_ATTEMPT"
)

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

// AgentTranscript is one agent node's saved progress in a run.
type AgentTranscript struct {
	TenantID      string
	RunID         string
	NodeID        string
	AgentKey      string
	AgentRevision int
	// Attempt is the attempt that saved it; a save from an older attempt is
	// refused (STALE_ATTEMPT), so a lost worker cannot overwrite progress.
	Attempt int
	// Dispatch is the attempt's re-dispatch count (infrastructure faults);
	// within one attempt, a save from an earlier dispatch is stale too.
	Dispatch int
	// Turn counts completed model turns.
	Turn int
	// Transcript is the agents package's transcript JSON.
	Transcript json.RawMessage
	// LedgerKeys are the ledger keys of the node's mutating tool calls.
	LedgerKeys []string
	// Outbox holds the events of the step this save records. They are
	// saved atomically with the transcript and appended (idempotently, by
	// event key) right after; a resumed attempt appends them again first,
	// so a crash between the two never loses a completed step's evidence.
	Outbox    []execution.EventDraft
	UpdatedAt time.Time
}

// GetAgentTranscript returns the saved transcript of (tenant, run, node), or
// failure.ErrNotFound before the node's first save.
func (s *Store) GetAgentTranscript(ctx context.Context, tenantID, runID, nodeID string) (AgentTranscript, error) {
	t := AgentTranscript{TenantID: tenantID, RunID: runID, NodeID: nodeID}
	var raw []byte
	err := s.Pool.QueryRow(ctx, `SELECT agent_key, agent_revision, attempt, turn, transcript, ledger_keys, updated_at
		FROM agent_transcripts WHERE tenant_id = $1 AND run_id = $2 AND node_id = $3`, tenantID, runID, nodeID).
		Scan(&t.AgentKey, &t.AgentRevision, &t.Attempt, &t.Turn, &raw, &t.LedgerKeys, &t.UpdatedAt)
	if err != nil {
		return AgentTranscript{}, fmt.Errorf("store: agent transcript: %w", notFound(err))
	}
	var env transcriptEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return AgentTranscript{}, fmt.Errorf("store: agent transcript: %w", err)
	}
	t.Transcript, t.Outbox = env.Transcript, env.Outbox
	if t.LedgerKeys == nil {
		t.LedgerKeys = []string{}
	}
	return t, nil
}

// transcriptEnvelope is the stored jsonb: the transcript and the outbox.
type transcriptEnvelope struct {
	Transcript json.RawMessage        `json:"transcript"`
	Outbox     []execution.EventDraft `json:"outbox,omitempty"`
}

// Usage is token and cost usage of agent model calls.
type Usage struct {
	Calls        int64
	InputTokens  int64
	OutputTokens int64
	// CostUSD is the cost in US dollars (0 when the model has no price).
	CostUSD float64
}

// SaveAgentTranscript saves t (insert or replace) and, in the same
// transaction, adds usage (may be nil) to the run's totals and settles the
// budget reservation of turn t.Turn (ReserveBudget) with it. A save from an
// attempt older than the stored one (or an earlier dispatch of the same
// attempt) is refused with STALE_ATTEMPT and
// changes nothing. Append t.Outbox with AppendEvents afterwards.
func (s *Store) SaveAgentTranscript(ctx context.Context, t AgentTranscript, usage *Usage) error {
	if t.TenantID == "" || t.RunID == "" || t.NodeID == "" || t.Attempt < 1 || !json.Valid(t.Transcript) {
		return failure.New(failure.CodeInvalidRequest, "tenant, run, node, attempt and a JSON transcript are required")
	}
	env, err := json.Marshal(transcriptEnvelope{Transcript: t.Transcript, Outbox: t.Outbox})
	if err != nil {
		return err
	}
	keys := t.LedgerKeys
	if keys == nil {
		keys = []string{}
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO agent_transcripts (tenant_id, run_id, node_id, agent_key, agent_revision,
				attempt, dispatch, turn, transcript, ledger_keys)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (tenant_id, run_id, node_id) DO UPDATE SET
				agent_key = EXCLUDED.agent_key, agent_revision = EXCLUDED.agent_revision, attempt = EXCLUDED.attempt,
				dispatch = EXCLUDED.dispatch, turn = EXCLUDED.turn, transcript = EXCLUDED.transcript,
				ledger_keys = EXCLUDED.ledger_keys, updated_at = now()
			WHERE (agent_transcripts.attempt, agent_transcripts.dispatch) <= (EXCLUDED.attempt, EXCLUDED.dispatch)`,
			t.TenantID, t.RunID, t.NodeID, t.AgentKey, t.AgentRevision, t.Attempt, t.Dispatch, t.Turn, env, keys)
		if isUnstorableJSON(err) {
			return failure.Wrap(err, failure.CodeInvalidRequest, "the transcript cannot be stored: %s", pgMessage(err))
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return failure.New(CodeStaleAttempt, "attempt %d of node %q is stale: a later attempt saved its transcript", t.Attempt, t.NodeID)
		}
		if usage == nil {
			return nil
		}
		// The turn's budget reservation (if any) settles with the usage
		// it records, so what is spent is never counted twice.
		if err := settleReservation(ctx, tx, t, *usage); err != nil {
			return err
		}
		return addUsage(ctx, tx, t.TenantID, t.RunID, *usage)
	})
	if err != nil {
		return fmt.Errorf("store: save agent transcript: %w", err)
	}
	return nil
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
