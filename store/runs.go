package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// Run is one row of runs: what was enqueued, by whom, and the projection of
// its event log (status, output, error, timestamps).
type Run struct {
	RunID    string
	TenantID string
	// TenantName is the tenant's display name at enqueue: every start of
	// the run (the enqueue's, the sweeper's) passes it as
	// RunParams.TenantName for context.tenantName.
	TenantName    string
	WorkflowKey   string
	Revision      int
	DraftRevision *int
	Checksum      string
	Mode          string
	Status        string
	Input         json.RawMessage
	InputHash     string
	Output        json.RawMessage
	Error         json.RawMessage
	Origin        execution.Origin
	Actor         execution.Actor
	Permissions   []string
	// ToolGrants are the enqueue's toolGrants (actionId@version, sorted),
	// narrowing what the run's agents may call; nil when none were given
	// (no narrowing), empty when the enqueue granted no tool. Part of the
	// idempotency binding.
	ToolGrants []string
	// ToolPolicy is a schedule's or webhook's tool policy when it started
	// the run (nil for a user's run): a policy widened later never reaches
	// the run.
	ToolPolicy    []string
	Fixtures      json.RawMessage
	WorkflowID    string
	TemporalRunID string
	Usage         json.RawMessage
	CreatedAt     time.Time
	StartedAt     *time.Time
	FinishedAt    *time.Time
	// AdmittedAt is when the run got its slot under its limits (for a run
	// never throttled, its enqueue); nil while it is throttled.
	AdmittedAt *time.Time
	// Position is a throttled run's place in its workflow's queue (1 is
	// next); 0 for a run that is not throttled.
	Position int
	// RequestedBudget is the enqueue's budget as requested (nil when it
	// gave none): part of the idempotency binding.
	RequestedBudget *Budget
	// Budget is the effective budget: the requested fields over the
	// workflow's default budget at enqueue. Agent calls reserve against it.
	Budget Budget
}

// RunCursor is a keyset position in the runs list, which is ordered by
// (CreatedAt, RunID) descending.
type RunCursor struct {
	CreatedAt time.Time
	RunID     string
}

// Cursor returns the keyset position just after r, for the next page.
func (r Run) Cursor() RunCursor { return RunCursor{CreatedAt: r.CreatedAt, RunID: r.RunID} }

// RunFilter selects runs of one tenant. Empty fields do not filter.
type RunFilter struct {
	WorkflowKey string
	Status      string
	Mode        string
	// Before returns only runs strictly older than the cursor (the next page).
	Before *RunCursor
	// Limit defaults to DefaultRunPageSize and is capped at MaxRunPageSize.
	Limit int
}

// Page sizes of ListRuns.
const (
	DefaultRunPageSize = 50
	MaxRunPageSize     = 1000
)

// runColumns is the column list every run query scans with scanRun.
// weft_enqueue_run (migration 00021) returns the same columns, computed the
// same way: a change here is a new migration replacing that function.
const runColumns = `run_id, tenant_id, tenant_name, workflow_key, revision, draft_revision, checksum, mode, status,
	input, input_hash, output, error, origin, actor, permissions, fixtures, workflow_id,
	COALESCE(temporal_run_id, ''), usage, created_at, started_at, finished_at, tool_grants, tool_policy,
	admitted_at, budget, budget_max_tokens, budget_max_cost_usd::float8,
	CASE WHEN status = 'throttled' THEN (SELECT count(*) FROM runs q WHERE q.tenant_id = runs.tenant_id
		AND q.workflow_key = runs.workflow_key AND q.status = 'throttled' AND q.queue_seq <= runs.queue_seq) ELSE 0 END`

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	var origin, actor, budget []byte
	err := row.Scan(&r.RunID, &r.TenantID, &r.TenantName, &r.WorkflowKey, &r.Revision, &r.DraftRevision, &r.Checksum,
		&r.Mode, &r.Status, &r.Input, &r.InputHash, &r.Output, &r.Error, &origin, &actor,
		&r.Permissions, &r.Fixtures, &r.WorkflowID, &r.TemporalRunID, &r.Usage,
		&r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.ToolGrants, &r.ToolPolicy,
		&r.AdmittedAt, &budget, &r.Budget.MaxTokens, &r.Budget.MaxCostUSD, &r.Position)
	if err != nil {
		return Run{}, err
	}
	if len(budget) > 0 {
		r.RequestedBudget = &Budget{}
		if err := json.Unmarshal(budget, r.RequestedBudget); err != nil {
			return Run{}, fmt.Errorf("store: run %s budget: %w", r.RunID, err)
		}
	}
	if err := json.Unmarshal(origin, &r.Origin); err != nil {
		return Run{}, fmt.Errorf("store: run %s origin: %w", r.RunID, err)
	}
	if err := json.Unmarshal(actor, &r.Actor); err != nil {
		return Run{}, fmt.Errorf("store: run %s actor: %w", r.RunID, err)
	}
	if r.Permissions == nil {
		r.Permissions = []string{}
	}
	return r, nil
}

func collectRuns(rows pgx.Rows) ([]Run, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) { return scanRun(row) })
}

// nullableList stores a nil list as SQL NULL and any other (even empty) as
// an array: for tool grants and policies nil means "not narrowed" and
// empty means "nothing".
func nullableList(l []string) any {
	if l == nil {
		return nil
	}
	return l
}

// nullJSON stores an empty RawMessage as SQL NULL.
func nullJSON(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return []byte(r)
}

// Enqueued is what EnqueueRun did.
type Enqueued struct {
	// Run is the new run (Created) or the run the key was bound to.
	Run     Run
	Created bool
	// Admitted are the runs the enqueue's admission pass admitted, in
	// queue order: the new run itself when a slot was free, and any run
	// that was waiting before it. The caller starts them.
	Admitted []Run
}

// CreateRun is EnqueueRun for callers that start nothing but the run they
// created (tests, tools): runs it admitted besides are left queued for the
// sweeper.
func (s *Store) CreateRun(ctx context.Context, r Run, idempotencyKey string) (run Run, created bool, err error) {
	e, err := s.EnqueueRun(ctx, r, idempotencyKey)
	return e.Run, e.Created, err
}

// EnqueueRun persists a run together with its idempotency binding
// (tenant, workflow key, idempotencyKey). When the key is already bound it
// inserts nothing and returns the bound run with Created=false; the caller
// compares InputHash and Mode to tell a repeated enqueue from an
// IDEMPOTENCY_CONFLICT.
//
// The decisions are weft_enqueue_run's (migration 00021), one statement:
// the binding is claimed first with INSERT ... ON CONFLICT DO NOTHING, so
// PostgreSQL makes concurrent claimers of one key wait for the first and
// exactly one run row is created however many callers race. A simulation
// run, or a live run that no limit applies to, is inserted queued (the
// live one under the tenant's shared admission lock), all in that one
// round trip.
//
// A live run whose tenant or workflow has a cap (or whose workflow has runs
// waiting already) goes through the admission queue: the function refuses
// it (SQLSTATE WF001) before writing anything, and it is enqueued again in
// a transaction (enqueueLimited).
func (s *Store) EnqueueRun(ctx context.Context, r Run, idempotencyKey string) (Enqueued, error) {
	return s.EnqueueRunExpecting(ctx, r, idempotencyKey, nil)
}

// EnqueueExpect is what an enqueue was decided with, besides the run
// itself: the run's Revision and Checksum (the revision named, or the
// latest published one), the workflow's default budget its Budget was
// filled from, and the revocations its permissions were checked against.
type EnqueueExpect struct {
	// NamedRevision is the revision the request named; nil expects the
	// run's Revision to be the workflow's latest published one.
	NamedRevision *int
	// DefaultBudget is the workflow's default budget (WorkflowLimits.Budget).
	DefaultBudget Budget
	// RevokedOf is the principal whose revocations were checked, Revoked
	// what was revoked from it (as RevokedScopes reads them); "" checks
	// none (a simulation).
	RevokedOf string
	Revoked   []string
}

// ErrEnqueueReadsChanged: EnqueueRunExpecting found that the revision, the
// workflow's default budget or the revocations it was told to expect are
// not what the database holds; nothing was written. The caller reads them
// again and decides again.
var ErrEnqueueReadsChanged = errors.New("store: the revision, default budget or revocations the enqueue was decided with changed")

// EnqueueRunExpecting is EnqueueRun that writes only if exp still holds,
// checked in the same statement as the write (weft_enqueue_run_checked,
// migration 00024, one body since 00028): else ErrEnqueueReadsChanged. It lets an enqueue
// decide from cached reads in one round trip and lose none of the
// guarantees of reading first: a revocation, publish or change of the
// default budget committed before the statement is seen by its check. A
// nil exp checks nothing (EnqueueRun). A key already bound is answered
// only when exp holds (else ErrEnqueueReadsChanged, and the caller's
// fresh reads find the binding).
func (s *Store) EnqueueRunExpecting(ctx context.Context, r Run, idempotencyKey string, exp *EnqueueExpect) (Enqueued, error) {
	if err := validateNewRun(r, idempotencyKey); err != nil {
		return Enqueued{}, err
	}
	if err := r.Budget.Validate("budget"); err != nil {
		return Enqueued{}, err
	}
	args, err := enqueueArgs(r, idempotencyKey)
	if err != nil {
		return Enqueued{}, err
	}
	call := enqueueCall{args: args}
	if exp != nil {
		call.expect = expectArgs(exp)
	}
	out, err := call.run(ctx, s.Pool, false)
	if isLimitsApply(err) {
		err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			var txErr error
			out, txErr = enqueueLimited(ctx, tx, call, r.TenantID, r.RunID)
			return txErr
		})
	}
	switch {
	case isReadsChanged(err):
		return Enqueued{}, ErrEnqueueReadsChanged
	case errors.Is(err, errBoundRunGone):
		// The claim conflicted with a committed binding whose run is gone:
		// retention deleted it since (the binding outlives it), or it was
		// deleted while we looked.
		return Enqueued{}, s.deletedRunOf(ctx, r.TenantID, r.WorkflowKey, idempotencyKey)
	case isUnstorableJSON(err):
		return Enqueued{}, failure.Wrap(err, failure.CodeInvalidInput, "the run input cannot be stored: %s", pgMessage(err))
	case err != nil:
		return Enqueued{}, fmt.Errorf("store: enqueue run: %w", err)
	}
	if out.Created && out.Run.Status == execution.StatusQueued && out.Admitted == nil {
		out.Admitted = []Run{out.Run}
	}
	return out, nil
}

// enqueueLimited enqueues a live run that limits apply to, in tx: inserted
// throttled under the tenant's exclusive admission lock (weft_enqueue_run
// with p_exclusive), then the admission pass (admit), so it is queued at
// once when a slot is free and nobody waits before it, and throttled
// otherwise.
func enqueueLimited(ctx context.Context, tx pgx.Tx, call enqueueCall, tenantID, runID string) (Enqueued, error) {
	out, err := call.run(ctx, tx, true)
	if err != nil || !out.Created {
		return out, err
	}
	adm, err := admitAndWake(ctx, tx, tenantID, runID)
	if err != nil {
		return Enqueued{}, err
	}
	out.Admitted = adm.Admitted
	for _, a := range adm.Admitted {
		if a.RunID == runID {
			out.Run = a // admitted at once: admit read it back
			return out, nil
		}
	}
	// Still throttled: its place in the queue is read after the pass.
	if out.Run, err = scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = $1`, runID)); err != nil {
		return Enqueued{}, fmt.Errorf("store: read new run: %w", err)
	}
	return out, nil
}

// errLimitsApplySQLState is what weft_enqueue_run and
// weft_enqueue_run_checked raise, writing nothing, when they are called
// without the exclusive lock for a live run that limits apply to (checked
// before the claim, or again under the shared lock).
const errLimitsApplySQLState = "WF001"

func isLimitsApply(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == errLimitsApplySQLState
}

// errReadsChangedSQLState is what weft_enqueue_run_checked raises, writing
// nothing, when what the enqueue was decided with changed.
const errReadsChangedSQLState = "WF002"

func isReadsChanged(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == errReadsChangedSQLState
}

// errBoundRunGone: weft_enqueue_run found the key bound to a run that no
// longer exists (it returns no row).
var errBoundRunGone = errors.New("store: the idempotency key's run is gone")

// enqueueSQL calls weft_enqueue_run (migration 00021): the created flag,
// then the columns of runColumns.
const enqueueSQL = `SELECT * FROM weft_enqueue_run($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
	$17, $18, $19, $20, $21, $22, $23)`

// enqueueCheckedSQL calls weft_enqueue_run_checked (migration 00024; its
// decisions made in one body of fewer statements since 00028): enqueueSQL's
// arguments, then what the enqueue expects.
const enqueueCheckedSQL = `SELECT * FROM weft_enqueue_run_checked($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
	$14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)`

// expectArgs lays exp out as weft_enqueue_run_checked's last arguments.
func expectArgs(exp *EnqueueExpect) []any {
	var named *int32
	if exp.NamedRevision != nil {
		n := int32(*exp.NamedRevision)
		named = &n
	}
	var of *string
	var revoked []string
	if exp.RevokedOf != "" {
		of, revoked = &exp.RevokedOf, nonNilScopes(exp.Revoked)
	}
	return []any{named, exp.DefaultBudget.MaxTokens, exp.DefaultBudget.MaxCostUSD, of, revoked}
}

// enqueueArgs lays a new run out as weft_enqueue_run's arguments, but for
// the last (p_exclusive).
func enqueueArgs(r Run, idempotencyKey string) ([]any, error) {
	origin, err := json.Marshal(r.Origin)
	if err != nil {
		return nil, err
	}
	actor, err := json.Marshal(r.Actor)
	if err != nil {
		return nil, err
	}
	var requested []byte
	if r.RequestedBudget != nil {
		if requested, err = json.Marshal(r.RequestedBudget); err != nil {
			return nil, err
		}
	}
	perms := r.Permissions
	if perms == nil {
		perms = []string{}
	}
	usage := r.Usage
	if len(usage) == 0 {
		usage = json.RawMessage(`{}`)
	}
	return []any{r.RunID, r.TenantID, r.WorkflowKey, idempotencyKey, r.Revision, r.DraftRevision, r.Checksum, r.Mode,
		[]byte(r.Input), r.InputHash, origin, actor, perms, nullJSON(r.Fixtures), r.WorkflowID, []byte(usage), r.TenantName,
		nullableList(r.ToolGrants), nullableList(r.ToolPolicy), requested, r.Budget.MaxTokens, r.Budget.MaxCostUSD}, nil
}

// enqueueCall is one enqueue's arguments: weft_enqueue_run's but for the
// last (p_exclusive), and what it expects (weft_enqueue_run_checked) or
// nil.
type enqueueCall struct {
	args, expect []any
}

// run calls weft_enqueue_run (or _checked) once: Run and Created from its
// row, errBoundRunGone when it returns none.
func (c enqueueCall) run(ctx context.Context, q querier, exclusive bool) (Enqueued, error) {
	var out Enqueued
	sql := enqueueSQL
	args := make([]any, 0, len(c.args)+1+len(c.expect))
	args = append(append(args, c.args...), exclusive)
	if c.expect != nil {
		sql = enqueueCheckedSQL
		args = append(args, c.expect...)
	}
	run, err := scanRun(prefixedRow{q.QueryRow(ctx, sql, args...), &out.Created})
	if errors.Is(err, pgx.ErrNoRows) {
		return Enqueued{}, errBoundRunGone
	}
	if err != nil {
		return Enqueued{}, err
	}
	out.Run = run
	return out, nil
}

// prefixedRow scans its leading columns into first, the rest into what
// Scan is given.
type prefixedRow struct {
	row   pgx.Row
	first any
}

func (p prefixedRow) Scan(dest ...any) error { return p.row.Scan(append([]any{p.first}, dest...)...) }

// CodeRunDeleted refuses an idempotency key whose run retention deleted
// (WEFT_RUN_RETENTION_DAYS): the binding outlives the run so the key cannot
// start another run while Temporal may still hold the first one's workflow
// id. Use another key.
const CodeRunDeleted = "RUN_DELETED"

// deletedRunOf explains a binding whose run is gone: RUN_DELETED when
// retention deleted it, else a not-found fault.
func (s *Store) deletedRunOf(ctx context.Context, tenantID, workflowKey, idempotencyKey string) error {
	var runID string
	var deletedAt, finishedAt *time.Time
	err := s.Pool.QueryRow(ctx, `SELECT run_id, run_deleted_at, run_finished_at FROM idempotency_bindings
		WHERE tenant_id = $1 AND workflow_key = $2 AND idempotency_key = $3`,
		tenantID, workflowKey, idempotencyKey).Scan(&runID, &deletedAt, &finishedAt)
	if err != nil || deletedAt == nil {
		return fmt.Errorf("store: read bound run: %w", failure.ErrNotFound)
	}
	details := map[string]any{"runId": runID, "idempotencyKey": idempotencyKey, "deletedAt": deletedAt.UTC()}
	if finishedAt != nil {
		details["finishedAt"] = finishedAt.UTC()
	}
	return failure.New(CodeRunDeleted,
		"idempotency key %q started run %s, which retention deleted on %s; use another key",
		idempotencyKey, runID, deletedAt.UTC().Format(time.RFC3339)).WithDetails(details)
}

// boundRunSQL reads the run an idempotency key is bound to (BoundRun,
// ReadForEnqueue).
const boundRunSQL = `
		SELECT ` + runColumns + ` FROM runs WHERE run_id = (
			SELECT run_id FROM idempotency_bindings
			WHERE tenant_id = $1 AND workflow_key = $2 AND idempotency_key = $3)`

// BoundRun returns the run an idempotency key (tenant, workflow key, key)
// already started, with ok=false when the key is not bound. The starter
// looks it up before anything else, so a repeated enqueue is answered by
// its binding even after a newer revision would refuse its input or need
// permissions the caller lacks.
func (s *Store) BoundRun(ctx context.Context, tenantID, workflowKey, idempotencyKey string) (run Run, ok bool, err error) {
	run, err = scanRun(s.Pool.QueryRow(ctx, boundRunSQL, tenantID, workflowKey, idempotencyKey))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, false, nil
	}
	if err != nil {
		return Run{}, false, fmt.Errorf("store: read bound run: %w", err)
	}
	return run, true, nil
}

// validateNewRun refuses a run that could not be started or audited later.
func validateNewRun(r Run, idempotencyKey string) error {
	missing := func(field string) error {
		return failure.New(failure.CodeInvalidRequest, "run %s is required", field)
	}
	switch {
	case r.RunID == "":
		return missing("runId")
	case r.TenantID == "":
		return missing("tenantId")
	case r.WorkflowKey == "":
		return missing("workflowKey")
	case r.Checksum == "":
		return missing("checksum")
	case r.InputHash == "":
		return missing("inputHash")
	case r.WorkflowID == "":
		return missing("workflowId")
	case idempotencyKey == "":
		return missing("idempotencyKey")
	case !json.Valid(r.Input):
		return failure.New(failure.CodeInvalidRequest, "run input is not valid JSON")
	case len(r.Fixtures) > 0 && !json.Valid(r.Fixtures):
		return failure.New(failure.CodeInvalidRequest, "run fixtures are not valid JSON")
	case len(r.Usage) > 0 && !json.Valid(r.Usage):
		return failure.New(failure.CodeInvalidRequest, "run usage is not valid JSON")
	case r.Mode != string(execution.ModeLive) && r.Mode != string(execution.ModeSimulation):
		return failure.New(failure.CodeInvalidRequest, "run mode %q is not live or simulation", r.Mode)
	}
	return nil
}

// GetRun returns one run of the tenant; another tenant's run is
// failure.ErrNotFound, exactly like a missing one.
func (s *Store) GetRun(ctx context.Context, tenantID, runID string) (Run, error) {
	r, err := scanRun(s.Pool.QueryRow(ctx,
		`SELECT `+runColumns+` FROM runs WHERE run_id = $1 AND tenant_id = $2`, runID, tenantID))
	if err != nil {
		return Run{}, notFound(err)
	}
	return r, nil
}

// ListRuns returns the tenant's runs, newest first, one keyset page at a time.
func (s *Store) ListRuns(ctx context.Context, tenantID string, f RunFilter) ([]Run, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultRunPageSize
	}
	limit = min(limit, MaxRunPageSize)
	var beforeAt *time.Time
	var beforeID *string
	if f.Before != nil {
		beforeAt, beforeID = &f.Before.CreatedAt, &f.Before.RunID
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT `+runColumns+` FROM runs
		WHERE tenant_id = $1
		  AND ($2 = '' OR workflow_key = $2)
		  AND ($3 = '' OR status = $3)
		  AND ($4::timestamptz IS NULL OR (created_at, run_id) < ($4, $5::text))
		  AND ($7 = '' OR mode = $7)
		ORDER BY created_at DESC, run_id DESC
		LIMIT $6`,
		tenantID, f.WorkflowKey, f.Status, beforeAt, beforeID, limit, f.Mode)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	return collectRuns(rows)
}

// QueuedRuns returns runs of every tenant still queued olderThan after
// they were admitted (their enqueue, for a run never throttled), oldest
// first: the sweeper starts their workflows again (the start is idempotent
// on the workflow id). Throttled runs are never among them.
func (s *Store) QueuedRuns(ctx context.Context, olderThan time.Duration, limit int) ([]Run, error) {
	if limit <= 0 {
		limit = DefaultRunPageSize
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT `+runColumns+` FROM runs
		WHERE status = 'queued' AND COALESCE(admitted_at, created_at) < now() - $1::bigint * interval '1 microsecond'
		ORDER BY COALESCE(admitted_at, created_at)
		LIMIT $2`,
		olderThan.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: queued runs: %w", err)
	}
	return collectRuns(rows)
}

// SetTemporalRunID records the Temporal run id of a run's workflow. The first
// id is kept: operations address the workflow id, and continue-as-new changes
// run ids, so later calls are no-ops.
func (s *Store) SetTemporalRunID(ctx context.Context, runID, temporalRunID string) error {
	tag, err := s.Pool.Exec(ctx, `
		UPDATE runs SET temporal_run_id = COALESCE(temporal_run_id, $2), updated_at = now()
		WHERE run_id = $1`, runID, temporalRunID)
	if err != nil {
		return fmt.Errorf("store: set temporal run id: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return failure.ErrNotFound
	}
	return nil
}

// RunsByStatus counts the runs of every tenant by status (statuses without
// runs are absent). It reads the runs table once: the metrics scrape calls
// it; the per-tenant view is ListRuns with a status filter.
func (s *Store) RunsByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := s.Pool.Query(ctx, `SELECT status, count(*) FROM runs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("store: runs by status: %w", err)
	}
	out := map[string]int64{}
	var status string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		out[status] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: runs by status: %w", err)
	}
	return out, nil
}
