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
)

// Bridge kinds, as stored in bridge_refusals.bridge_kind and used as the
// kind of a run's origin.
const (
	BridgeSchedule = "schedule"
	BridgeWebhook  = "webhook"
)

// ScheduleSpec is when a schedule fires: exactly one of Cron (a Temporal
// cron expression) and Every (a Go duration such as "5s").
type ScheduleSpec struct {
	Cron  string `json:"cron,omitempty"`
	Every string `json:"every,omitempty"`
}

// Schedule is one row of schedules.
type Schedule struct {
	TenantID    string
	ScheduleID  string
	WorkflowKey string
	Spec        ScheduleSpec
	// Input is the run input of every firing, as written: string values
	// hold {{ }} templates when InputTemplated (resolved at each firing;
	// the row keeps them raw).
	Input json.RawMessage
	// InputBindings are the explicit record bindings templates resolve
	// with (e.g. {"agentId": "triage"}); empty when none.
	InputBindings map[string]string
	// InputTemplated is set for a schedule created with templates in its
	// input; the input of other schedules is literal.
	InputTemplated bool
	// Paused is the state the schedule was created in; Temporal holds the
	// live state.
	Paused bool
	// CreatedBy is the sub of the configuring user (the service actor's
	// configuredBy); Scopes is that user's scope snapshot at creation.
	CreatedBy          string
	TenantName         string
	Scopes             []string
	TemporalScheduleID string
	// ToolPolicy is the schedule's tool policy (actionId@version, sorted):
	// the only tools its runs' agents may be offered; empty offers none.
	ToolPolicy []string
	// ToolPolicyUpdatedBy and ToolPolicyUpdatedAt say who set the policy
	// last (the creator at creation) and when.
	ToolPolicyUpdatedBy string
	ToolPolicyUpdatedAt time.Time
	CreatedAt           time.Time
	DeletedAt           *time.Time
}

// Webhook is one row of webhooks. The secret is kept encrypted; the store
// never sees it in the clear.
type Webhook struct {
	TenantID         string
	WebhookID        string
	WorkflowKey      string
	SecretCiphertext []byte
	SecretNonce      []byte
	CreatedBy        string
	TenantName       string
	Scopes           []string
	// ToolPolicy, ToolPolicyUpdatedBy and ToolPolicyUpdatedAt are as on a
	// Schedule.
	ToolPolicy          []string
	ToolPolicyUpdatedBy string
	ToolPolicyUpdatedAt time.Time
	CreatedAt           time.Time
	DeletedAt           *time.Time
}

// BridgeCursor is a keyset position in a schedules or webhooks list, which
// is ordered by (CreatedAt, ID) ascending.
type BridgeCursor struct {
	CreatedAt time.Time
	ID        string
}

// Refusal is the evidence of a schedule firing or webhook delivery that was
// refused instead of run.
type Refusal struct {
	TenantID   string
	BridgeKind string
	BridgeID   string
	// FiringKey is the idempotency key the run would have had.
	FiringKey string
	Code      string
	Message   string
	// Missing lists the scopes the service actor lacked, if that was why.
	Missing   []string
	Details   json.RawMessage
	CreatedAt time.Time
}

// Bridge list page sizes.
const (
	DefaultBridgePageSize = 50
	MaxBridgePageSize     = 200
)

func bridgeLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultBridgePageSize
	case n > MaxBridgePageSize+1: // +1: callers ask one extra row to detect a next page
		return MaxBridgePageSize + 1
	}
	return n
}

// isForeignKeyViolation reports a foreign-key violation (the workflow a
// bridge names does not exist in the tenant).
func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

func nonNilScopes(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// CreateSchedule inserts a schedule. A workflow key the tenant does not have
// is failure.ErrNotFound.
func (s *Store) CreateSchedule(ctx context.Context, sc Schedule) (Schedule, error) {
	if sc.TenantID == "" || sc.ScheduleID == "" || sc.WorkflowKey == "" || sc.CreatedBy == "" || sc.TemporalScheduleID == "" {
		return Schedule{}, failure.New(failure.CodeInternal, "store: schedule needs tenant, id, workflow key, creator and Temporal id")
	}
	if (sc.Spec.Cron == "") == (sc.Spec.Every == "") {
		return Schedule{}, failure.New(failure.CodeInvalidRequest, "a schedule needs exactly one of cron and every")
	}
	spec, err := json.Marshal(sc.Spec)
	if err != nil {
		return Schedule{}, err
	}
	input := sc.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	bindings := sc.InputBindings
	if bindings == nil {
		bindings = map[string]string{}
	}
	rawBindings, err := json.Marshal(bindings)
	if err != nil {
		return Schedule{}, err
	}
	row := s.Pool.QueryRow(ctx, `INSERT INTO schedules
		(tenant_id, schedule_id, workflow_key, spec, input, paused, created_by, tenant_name, scopes, temporal_schedule_id,
		 tool_policy, tool_policy_updated_by, input_bindings, input_templated)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $7, $12, $13)
		RETURNING `+scheduleColumns,
		sc.TenantID, sc.ScheduleID, sc.WorkflowKey, spec, []byte(input), sc.Paused, sc.CreatedBy,
		sc.TenantName, nonNilScopes(sc.Scopes), sc.TemporalScheduleID, nonNilScopes(sc.ToolPolicy),
		rawBindings, sc.InputTemplated)
	out, err := scanSchedule(row)
	switch {
	case isForeignKeyViolation(err):
		return Schedule{}, failure.ErrNotFound
	case isUniqueViolation(err):
		return Schedule{}, failure.New(failure.CodeAlreadyExists, "schedule %q already exists", sc.ScheduleID)
	case err != nil:
		return Schedule{}, fmt.Errorf("store: create schedule: %w", err)
	}
	return out, nil
}

const scheduleColumns = `tenant_id, schedule_id, workflow_key, spec, input, paused, created_by, tenant_name,
	scopes, temporal_schedule_id, tool_policy, tool_policy_updated_by, tool_policy_updated_at, created_at, deleted_at,
	input_bindings, input_templated`

func scanSchedule(row pgx.Row) (Schedule, error) {
	var sc Schedule
	var spec, bindings []byte
	err := row.Scan(&sc.TenantID, &sc.ScheduleID, &sc.WorkflowKey, &spec, &sc.Input, &sc.Paused,
		&sc.CreatedBy, &sc.TenantName, &sc.Scopes, &sc.TemporalScheduleID,
		&sc.ToolPolicy, &sc.ToolPolicyUpdatedBy, &sc.ToolPolicyUpdatedAt, &sc.CreatedAt, &sc.DeletedAt,
		&bindings, &sc.InputTemplated)
	if err != nil {
		return Schedule{}, err
	}
	if err := json.Unmarshal(spec, &sc.Spec); err != nil {
		return Schedule{}, fmt.Errorf("store: schedule %s spec: %w", sc.ScheduleID, err)
	}
	if err := json.Unmarshal(bindings, &sc.InputBindings); err != nil {
		return Schedule{}, fmt.Errorf("store: schedule %s input bindings: %w", sc.ScheduleID, err)
	}
	if sc.InputBindings == nil {
		sc.InputBindings = map[string]string{}
	}
	sc.Scopes = nonNilScopes(sc.Scopes)
	sc.ToolPolicy = nonNilScopes(sc.ToolPolicy)
	return sc, nil
}

// ScheduleFiringInput returns the input stored for one firing of a
// templated schedule, with found=false when none is stored yet.
func (s *Store) ScheduleFiringInput(ctx context.Context, tenantID, scheduleID, firingKey string) (json.RawMessage, bool, error) {
	var input json.RawMessage
	err := s.Pool.QueryRow(ctx, `SELECT input FROM schedule_firings
		WHERE tenant_id = $1 AND schedule_id = $2 AND firing_key = $3`, tenantID, scheduleID, firingKey).Scan(&input)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: schedule firing: %w", err)
	}
	return input, true, nil
}

// SaveScheduleFiringInput stores the input one firing of a templated
// schedule resolved to, unless one is stored already, and returns the
// stored one: two executions of the same firing racing converge on the
// first input, so a retried enqueue never sees another value.
func (s *Store) SaveScheduleFiringInput(ctx context.Context, tenantID, scheduleID, firingKey string, input json.RawMessage) (json.RawMessage, error) {
	if tenantID == "" || scheduleID == "" || firingKey == "" || !json.Valid(input) {
		return nil, failure.New(failure.CodeInternal, "store: a firing needs tenant, schedule, firing key and a JSON input")
	}
	var stored json.RawMessage
	err := s.Pool.QueryRow(ctx, `WITH ins AS (
			INSERT INTO schedule_firings (tenant_id, schedule_id, firing_key, input) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING RETURNING input)
		SELECT input FROM ins
		UNION ALL
		SELECT input FROM schedule_firings WHERE tenant_id = $1 AND schedule_id = $2 AND firing_key = $3
		LIMIT 1`, tenantID, scheduleID, firingKey, []byte(input)).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		// A concurrent execution inserted it after this statement's
		// snapshot was taken: read it with a new one.
		in, found, err := s.ScheduleFiringInput(ctx, tenantID, scheduleID, firingKey)
		if err == nil && !found {
			err = errors.New("the stored firing disappeared")
		}
		if err != nil {
			return nil, fmt.Errorf("store: save schedule firing: %w", err)
		}
		return in, nil
	}
	if isUnstorableJSON(err) {
		return nil, failure.Wrap(err, failure.CodeInvalidInput, "the resolved input cannot be stored: %s", pgMessage(err))
	}
	if err != nil {
		return nil, fmt.Errorf("store: save schedule firing: %w", err)
	}
	return stored, nil
}

// GetSchedule returns a schedule of tenant, deleted or not (DeletedAt
// tells); another tenant's schedule is failure.ErrNotFound.
func (s *Store) GetSchedule(ctx context.Context, tenantID, scheduleID string) (Schedule, error) {
	row := s.Pool.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE tenant_id = $1 AND schedule_id = $2`, tenantID, scheduleID)
	sc, err := scanSchedule(row)
	if err != nil {
		return Schedule{}, notFound(err)
	}
	return sc, nil
}

// ListSchedules lists the live schedules of a workflow, oldest first,
// starting after the cursor.
func (s *Store) ListSchedules(ctx context.Context, tenantID, workflowKey string, after *BridgeCursor, limit int) ([]Schedule, error) {
	var c BridgeCursor
	if after != nil {
		c = *after
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE tenant_id = $1 AND workflow_key = $2 AND deleted_at IS NULL
		  AND ($3::boolean OR (created_at, schedule_id) > ($4, $5))
		ORDER BY created_at, schedule_id
		LIMIT $6`, tenantID, workflowKey, after == nil, c.CreatedAt, c.ID, bridgeLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: list schedules: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Schedule, error) { return scanSchedule(row) })
}

// DeleteSchedule marks a live schedule of (tenant, workflow key) deleted and
// returns it. A missing, already deleted or foreign schedule is
// failure.ErrNotFound.
func (s *Store) DeleteSchedule(ctx context.Context, tenantID, workflowKey, scheduleID string) (Schedule, error) {
	row := s.Pool.QueryRow(ctx, `UPDATE schedules SET deleted_at = now()
		WHERE tenant_id = $1 AND workflow_key = $2 AND schedule_id = $3 AND deleted_at IS NULL
		RETURNING `+scheduleColumns, tenantID, workflowKey, scheduleID)
	sc, err := scanSchedule(row)
	if err != nil {
		return Schedule{}, notFound(err)
	}
	return sc, nil
}

// CreateWebhook inserts a webhook. A workflow key the tenant does not have
// is failure.ErrNotFound.
func (s *Store) CreateWebhook(ctx context.Context, w Webhook) (Webhook, error) {
	if w.TenantID == "" || w.WebhookID == "" || w.WorkflowKey == "" || w.CreatedBy == "" ||
		len(w.SecretCiphertext) == 0 || len(w.SecretNonce) == 0 {
		return Webhook{}, failure.New(failure.CodeInternal, "store: webhook needs tenant, id, workflow key, creator and an encrypted secret")
	}
	row := s.Pool.QueryRow(ctx, `INSERT INTO webhooks
		(tenant_id, webhook_id, workflow_key, secret_ciphertext, secret_nonce, created_by, tenant_name, scopes,
		 tool_policy, tool_policy_updated_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $6)
		RETURNING `+webhookColumns,
		w.TenantID, w.WebhookID, w.WorkflowKey, w.SecretCiphertext, w.SecretNonce, w.CreatedBy,
		w.TenantName, nonNilScopes(w.Scopes), nonNilScopes(w.ToolPolicy))
	out, err := scanWebhook(row)
	switch {
	case isForeignKeyViolation(err):
		return Webhook{}, failure.ErrNotFound
	case isUniqueViolation(err):
		return Webhook{}, failure.New(failure.CodeAlreadyExists, "webhook %q already exists", w.WebhookID)
	case err != nil:
		return Webhook{}, fmt.Errorf("store: create webhook: %w", err)
	}
	return out, nil
}

const webhookColumns = `tenant_id, webhook_id, workflow_key, secret_ciphertext, secret_nonce, created_by,
	tenant_name, scopes, tool_policy, tool_policy_updated_by, tool_policy_updated_at, created_at, deleted_at`

func scanWebhook(row pgx.Row) (Webhook, error) {
	var w Webhook
	err := row.Scan(&w.TenantID, &w.WebhookID, &w.WorkflowKey, &w.SecretCiphertext, &w.SecretNonce,
		&w.CreatedBy, &w.TenantName, &w.Scopes, &w.ToolPolicy, &w.ToolPolicyUpdatedBy, &w.ToolPolicyUpdatedAt,
		&w.CreatedAt, &w.DeletedAt)
	if err != nil {
		return Webhook{}, err
	}
	w.Scopes = nonNilScopes(w.Scopes)
	w.ToolPolicy = nonNilScopes(w.ToolPolicy)
	return w, nil
}

// LiveWebhook returns the live webhook with id, whatever its tenant (POST
// /hooks/{id} names no tenant). A missing or deleted webhook is
// failure.ErrNotFound.
func (s *Store) LiveWebhook(ctx context.Context, webhookID string) (Webhook, error) {
	row := s.Pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE webhook_id = $1 AND deleted_at IS NULL`, webhookID)
	w, err := scanWebhook(row)
	if err != nil {
		return Webhook{}, notFound(err)
	}
	return w, nil
}

// ListWebhooks lists the live webhooks of a workflow, oldest first,
// starting after the cursor.
func (s *Store) ListWebhooks(ctx context.Context, tenantID, workflowKey string, after *BridgeCursor, limit int) ([]Webhook, error) {
	var c BridgeCursor
	if after != nil {
		c = *after
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE tenant_id = $1 AND workflow_key = $2 AND deleted_at IS NULL
		  AND ($3::boolean OR (created_at, webhook_id) > ($4, $5))
		ORDER BY created_at, webhook_id
		LIMIT $6`, tenantID, workflowKey, after == nil, c.CreatedAt, c.ID, bridgeLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: list webhooks: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Webhook, error) { return scanWebhook(row) })
}

// GetWebhook returns a webhook of tenant, deleted or not (DeletedAt
// tells); another tenant's webhook is failure.ErrNotFound.
func (s *Store) GetWebhook(ctx context.Context, tenantID, webhookID string) (Webhook, error) {
	row := s.Pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE tenant_id = $1 AND webhook_id = $2`, tenantID, webhookID)
	w, err := scanWebhook(row)
	if err != nil {
		return Webhook{}, notFound(err)
	}
	return w, nil
}

// SetScheduleToolPolicy replaces the tool policy of a live schedule of
// (tenant, workflow key) and returns the schedule. A missing, deleted or
// foreign schedule is failure.ErrNotFound. The caller checks the policy.
func (s *Store) SetScheduleToolPolicy(ctx context.Context, tenantID, workflowKey, scheduleID string, policy []string, by string) (Schedule, error) {
	row := s.Pool.QueryRow(ctx, `UPDATE schedules
		SET tool_policy = $4, tool_policy_updated_by = $5, tool_policy_updated_at = now()
		WHERE tenant_id = $1 AND workflow_key = $2 AND schedule_id = $3 AND deleted_at IS NULL
		RETURNING `+scheduleColumns, tenantID, workflowKey, scheduleID, nonNilScopes(policy), by)
	sc, err := scanSchedule(row)
	if err != nil {
		return Schedule{}, notFound(err)
	}
	return sc, nil
}

// SetWebhookToolPolicy is SetScheduleToolPolicy for a webhook.
func (s *Store) SetWebhookToolPolicy(ctx context.Context, tenantID, workflowKey, webhookID string, policy []string, by string) (Webhook, error) {
	row := s.Pool.QueryRow(ctx, `UPDATE webhooks
		SET tool_policy = $4, tool_policy_updated_by = $5, tool_policy_updated_at = now()
		WHERE tenant_id = $1 AND workflow_key = $2 AND webhook_id = $3 AND deleted_at IS NULL
		RETURNING `+webhookColumns, tenantID, workflowKey, webhookID, nonNilScopes(policy), by)
	w, err := scanWebhook(row)
	if err != nil {
		return Webhook{}, notFound(err)
	}
	return w, nil
}

// DeleteWebhook marks a live webhook of (tenant, workflow key) deleted. A
// missing, already deleted or foreign webhook is failure.ErrNotFound.
func (s *Store) DeleteWebhook(ctx context.Context, tenantID, workflowKey, webhookID string) error {
	tag, err := s.Pool.Exec(ctx, `UPDATE webhooks SET deleted_at = now()
		WHERE tenant_id = $1 AND workflow_key = $2 AND webhook_id = $3 AND deleted_at IS NULL`,
		tenantID, workflowKey, webhookID)
	if err != nil {
		return fmt.Errorf("store: delete webhook: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return failure.ErrNotFound
	}
	return nil
}

// Revocation is one row of revocations: scope withdrawn from Sub in the
// tenant — from the runs Sub started (from their next tool call or node
// attempt on) and from every service actor (schedule, webhook) Sub
// configured.
type Revocation struct {
	TenantID  string
	Sub       string
	Scope     string
	CreatedAt time.Time
}

// RevocationCursor is a keyset position in a revocations list, which is
// ordered by (Sub, Scope) ascending.
type RevocationCursor struct {
	Sub   string
	Scope string
}

const revocationColumns = `tenant_id, sub, scope, created_at`

func scanRevocation(row pgx.CollectableRow) (Revocation, error) {
	var r Revocation
	err := row.Scan(&r.TenantID, &r.Sub, &r.Scope, &r.CreatedAt)
	return r, err
}

// AddRevocation withdraws scope from sub in tenant: from sub's own runs and
// every service actor sub configured. It returns the revocation and whether this call created it:
// adding an existing revocation returns that row (its CreatedAt) with
// created false. It returns only once every live worker's revocation
// cache has dropped what the revocation changes (awaitRevocationHolders),
// an existing revocation's too, so the next attempt anywhere sees it.
func (s *Store) AddRevocation(ctx context.Context, tenantID, sub, scope string) (Revocation, bool, error) {
	if tenantID == "" || sub == "" || scope == "" {
		return Revocation{}, false, failure.New(failure.CodeInvalidRequest, "a revocation needs tenant, sub and scope")
	}
	// The insert and the read of an existing row are separate statements:
	// a row inserted by a concurrent transaction after one statement's
	// snapshot makes the insert do nothing yet stays invisible to a read in
	// that statement. A row deleted between the two is inserted again.
	for attempt := 0; attempt < 3; attempt++ {
		rows, err := s.Pool.Query(ctx, `INSERT INTO revocations (tenant_id, sub, scope) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING
			RETURNING `+revocationColumns, tenantID, sub, scope)
		if err != nil {
			return Revocation{}, false, fmt.Errorf("store: add revocation: %w", err)
		}
		created, err := pgx.CollectRows(rows, scanRevocation)
		if err != nil {
			return Revocation{}, false, fmt.Errorf("store: add revocation: %w", err)
		}
		if len(created) == 1 {
			return created[0], true, s.awaitRevocationHolders(ctx)
		}
		rows, err = s.Pool.Query(ctx, `SELECT `+revocationColumns+` FROM revocations
			WHERE tenant_id = $1 AND sub = $2 AND scope = $3`, tenantID, sub, scope)
		if err != nil {
			return Revocation{}, false, fmt.Errorf("store: add revocation: %w", err)
		}
		existing, err := pgx.CollectRows(rows, scanRevocation)
		if err != nil {
			return Revocation{}, false, fmt.Errorf("store: add revocation: %w", err)
		}
		if len(existing) == 1 {
			return existing[0], false, s.awaitRevocationHolders(ctx)
		}
	}
	return Revocation{}, false, fmt.Errorf("store: add revocation: the revocation of %s from %s kept changing concurrently", scope, sub)
}

// DeleteRevocation deletes a revocation of tenant. A missing one (or
// another tenant's) is failure.ErrNotFound. Like AddRevocation it returns
// once every live worker's revocation cache has dropped the change.
func (s *Store) DeleteRevocation(ctx context.Context, tenantID, sub, scope string) error {
	tag, err := s.Pool.Exec(ctx, `DELETE FROM revocations WHERE tenant_id = $1 AND sub = $2 AND scope = $3`,
		tenantID, sub, scope)
	if err != nil {
		return fmt.Errorf("store: delete revocation: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return failure.ErrNotFound
	}
	return s.awaitRevocationHolders(ctx)
}

// Revoke is AddRevocation for callers that need not know whether the row
// is new: revoking twice is harmless.
func (s *Store) Revoke(ctx context.Context, tenantID, sub, scope string) error {
	_, _, err := s.AddRevocation(ctx, tenantID, sub, scope)
	return err
}

// Unrevoke is DeleteRevocation for callers that need not know whether
// there was a row: deleting a missing one is harmless.
func (s *Store) Unrevoke(ctx context.Context, tenantID, sub, scope string) error {
	if err := s.DeleteRevocation(ctx, tenantID, sub, scope); err != nil && !errors.Is(err, failure.ErrNotFound) {
		return err
	}
	return nil
}

// ListRevocations lists the revocations of tenant, of one sub or, when sub
// is "", of every sub, ordered by (sub, scope), starting after the cursor.
func (s *Store) ListRevocations(ctx context.Context, tenantID, sub string, after *RevocationCursor, limit int) ([]Revocation, error) {
	var c RevocationCursor
	if after != nil {
		c = *after
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+revocationColumns+` FROM revocations
		WHERE tenant_id = $1 AND ($2 = '' OR sub = $2)
		  AND ($3::boolean OR (sub, scope) > ($4, $5))
		ORDER BY sub, scope
		LIMIT $6`, tenantID, sub, after == nil, c.Sub, c.Scope, bridgeLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: list revocations: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRevocation)
	if err != nil {
		return nil, fmt.Errorf("store: list revocations: %w", err)
	}
	if out == nil {
		out = []Revocation{}
	}
	return out, nil
}

// revokedScopesSQL reads the scopes revoked from a subject, sorted
// (RevokedScopes, ReadForEnqueue).
const revokedScopesSQL = `SELECT scope FROM revocations WHERE tenant_id = $1 AND sub = $2 ORDER BY scope`

// RevokedScopes returns the scopes revoked from sub in tenant, sorted.
func (s *Store) RevokedScopes(ctx context.Context, tenantID, sub string) ([]string, error) {
	rows, err := s.Pool.Query(ctx, revokedScopesSQL, tenantID, sub)
	if err != nil {
		return nil, fmt.Errorf("store: revoked scopes: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: revoked scopes: %w", err)
	}
	return nonNilScopes(out), nil
}

// RecordRefusal keeps the evidence of a refused firing or delivery. The
// first record of (tenant, kind, bridge, firing key) wins, so a retried
// firing records its refusal once.
func (s *Store) RecordRefusal(ctx context.Context, r Refusal) error {
	if r.TenantID == "" || r.BridgeID == "" || r.FiringKey == "" || r.Code == "" {
		return failure.New(failure.CodeInternal, "store: a refusal needs tenant, bridge, firing key and code")
	}
	if r.BridgeKind != BridgeSchedule && r.BridgeKind != BridgeWebhook {
		return failure.New(failure.CodeInternal, "store: unknown bridge kind %q", r.BridgeKind)
	}
	var details []byte
	if len(r.Details) > 0 {
		d, err := EvidenceData(r.Details)
		if err != nil {
			return fmt.Errorf("store: refusal details: %w", err)
		}
		details = d
	}
	_, err := s.Pool.Exec(ctx, `INSERT INTO bridge_refusals
		(tenant_id, bridge_kind, bridge_id, firing_key, code, message, missing, details)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT DO NOTHING`,
		r.TenantID, r.BridgeKind, r.BridgeID, r.FiringKey, r.Code, r.Message, nonNilScopes(r.Missing), details)
	if err != nil {
		return fmt.Errorf("store: record refusal: %w", err)
	}
	return nil
}

const refusalColumns = `tenant_id, bridge_kind, bridge_id, firing_key, code, message, missing, details, created_at`

func scanRefusal(row pgx.CollectableRow) (Refusal, error) {
	var r Refusal
	err := row.Scan(&r.TenantID, &r.BridgeKind, &r.BridgeID, &r.FiringKey, &r.Code, &r.Message,
		&r.Missing, &r.Details, &r.CreatedAt)
	r.Missing = nonNilScopes(r.Missing)
	return r, err
}

// LatestRefusals returns the most recent refusal of each of the bridges ids
// of kind that has one.
func (s *Store) LatestRefusals(ctx context.Context, tenantID, kind string, ids []string) (map[string]Refusal, error) {
	out := map[string]Refusal{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.Pool.Query(ctx, `SELECT DISTINCT ON (bridge_id) `+refusalColumns+` FROM bridge_refusals
		WHERE tenant_id = $1 AND bridge_kind = $2 AND bridge_id = ANY($3)
		ORDER BY bridge_id, created_at DESC, firing_key DESC`, tenantID, kind, ids)
	if err != nil {
		return nil, fmt.Errorf("store: latest refusals: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanRefusal)
	if err != nil {
		return nil, fmt.Errorf("store: latest refusals: %w", err)
	}
	for _, r := range list {
		out[r.BridgeID] = r
	}
	return out, nil
}

// ListRefusals returns the most recent refusals of one bridge, newest first.
func (s *Store) ListRefusals(ctx context.Context, tenantID, kind, bridgeID string, limit int) ([]Refusal, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+refusalColumns+` FROM bridge_refusals
		WHERE tenant_id = $1 AND bridge_kind = $2 AND bridge_id = $3
		ORDER BY created_at DESC, firing_key DESC
		LIMIT $4`, tenantID, kind, bridgeID, bridgeLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: list refusals: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRefusal)
	if err != nil {
		return nil, fmt.Errorf("store: list refusals: %w", err)
	}
	if out == nil {
		out = []Refusal{}
	}
	return out, nil
}
