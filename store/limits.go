package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// Limits on running work (issue 19). A live run holds a slot of its
// workflow and of its tenant while it is queued or running; a run accepted
// while a cap is full is stored throttled and admitted, first in first
// out, when a slot frees. Every decision is made here, in PostgreSQL,
// under the tenant's admission lock (a transaction-scoped advisory lock),
// so API replicas and workers never admit past a cap however many decide
// at once. Simulation runs are exempt: they are never throttled and hold
// no slot.

// SlotsChannel is the PostgreSQL notification channel a run's settlement
// notifies, with the tenant id as payload, when the run held a slot and
// runs of its tenant wait for one (the trigger runs_slot_freed, migration
// 00014, whatever code settles the run), and an enqueue or a change of
// limits that leaves runs waiting only for a start rate (admitAndWake). The
// starter's dispatchers listen on it (ListenSlots).
const SlotsChannel = "weft_run_slots"

// RateWindow is the window of maxStartsPerMinute: at most that many runs
// of the workflow are admitted in any RateWindow.
const RateWindow = time.Minute

// Bounds of the limit values.
const (
	MaxConcurrentRunsLimit  = 100_000
	MaxStartsPerMinuteLimit = 100_000
	// maxCandidates bounds the throttled runs one admission pass examines.
	maxCandidates = 1000
)

// Throttle reasons: why a throttled run is waiting (run.throttled data.reason).
const (
	ThrottleTenantConcurrency   = "TENANT_CONCURRENCY"
	ThrottleWorkflowConcurrency = "WORKFLOW_CONCURRENCY"
	ThrottleWorkflowStartRate   = "WORKFLOW_START_RATE"
)

// admissionLockClass is the first key of the tenant admission lock
// (pg_advisory_xact_lock(class, hashtext(tenant))): "weft" in ASCII. The
// trigger runs_slot_freed (migration 00014) and weft_enqueue_run
// (migration 00021) take the same lock.
const admissionLockClass = 0x77656674

// WorkflowLimits are the caps and the default budget of one workflow's
// runs. A nil field sets no limit.
type WorkflowLimits struct {
	TenantID    string
	WorkflowKey string
	// MaxConcurrentRuns bounds the workflow's live runs queued or running.
	MaxConcurrentRuns *int
	// MaxStartsPerMinute bounds the workflow's live runs admitted in any
	// RateWindow.
	MaxStartsPerMinute *int
	// Budget is the default budget of the workflow's runs: an enqueue's
	// own budget fields win over it.
	Budget Budget
	// UpdatedBy and UpdatedAt are zero while nothing was ever set.
	UpdatedBy string
	UpdatedAt time.Time
}

// TenantLimits is the tenant-wide cap. A nil field sets no limit.
type TenantLimits struct {
	TenantID string
	// MaxConcurrentRuns bounds the tenant's live runs queued or running,
	// across all of its workflows.
	MaxConcurrentRuns *int
	UpdatedBy         string
	UpdatedAt         time.Time
}

// Admission is what one pass of the dispatcher did.
type Admission struct {
	// Admitted are the runs that got a slot in this pass, now queued, in
	// the order they were enqueued: the caller starts them.
	Admitted []Run
	// RetryAt, when set, is the earliest time a run that waits only for its
	// workflow's start rate may be admitted: no settlement will wake the
	// dispatcher for it, so the dispatcher arms a timer.
	RetryAt *time.Time
	// Reasons says why each run examined but not admitted waits.
	Reasons map[string]string
}

// LimitsUsage is what a tenant's runs hold of its limits now.
type LimitsUsage struct {
	// Running counts the tenant's live runs holding a slot (queued or
	// running); Throttled those waiting for one.
	Running, Throttled int
	// Workflows has one entry per workflow with runs holding or waiting
	// for a slot, or asked for, or admitted within the rate window.
	Workflows map[string]WorkflowUsage
}

// WorkflowUsage is one workflow's share of LimitsUsage.
type WorkflowUsage struct {
	Running, Throttled int
	// StartsInWindow counts its runs admitted in the last RateWindow.
	StartsInWindow int
}

// lockTenant takes the tenant's exclusive admission lock for the
// transaction: to decide admissions or change limits. An enqueue that no
// limit applies to takes it shared (weft_enqueue_run, migration 00021), so
// such enqueues never wait for each other, and a change of limits waits
// for those in flight.
func lockTenant(ctx context.Context, tx pgx.Tx, tenantID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int, hashtext($2))`, admissionLockClass, tenantID)
	if err != nil {
		return fmt.Errorf("store: admission lock: %w", err)
	}
	return nil
}

// candidate is a throttled run the admission pass examines.
type candidate struct {
	runID, key string
	createdAt  time.Time
}

// admit is the one dispatcher decision: under the tenant's exclusive
// admission lock (the caller holds it), it walks the tenant's throttled
// runs in queue order and admits each one whose tenant cap, workflow cap
// and workflow start rate all have room now, counting the runs it admits.
// A run whose workflow is full waits without blocking other workflows'
// runs behind it; a full tenant cap ends the pass. fresh names a run
// created in this transaction: it gets no run.admitted event (it never
// waited), and a run.throttled event when it has to wait.
func admit(ctx context.Context, tx pgx.Tx, tenantID, fresh string) (Admission, error) {
	adm := Admission{Reasons: map[string]string{}}
	var now time.Time
	var tenantCap *int
	err := tx.QueryRow(ctx, `SELECT clock_timestamp(),
		(SELECT max_concurrent_runs FROM tenant_limits WHERE tenant_id = $1)`, tenantID).Scan(&now, &tenantCap)
	if err != nil {
		return adm, fmt.Errorf("store: admission: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT run_id, workflow_key, created_at FROM runs
		WHERE tenant_id = $1 AND status = 'throttled' ORDER BY queue_seq LIMIT $2`, tenantID, maxCandidates)
	if err != nil {
		return adm, fmt.Errorf("store: admission candidates: %w", err)
	}
	cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
		var c candidate
		return c, r.Scan(&c.runID, &c.key, &c.createdAt)
	})
	if err != nil {
		return adm, fmt.Errorf("store: admission candidates: %w", err)
	}
	if len(cands) == 0 {
		return adm, nil
	}
	keys := make([]string, 0, len(cands))
	for _, c := range cands {
		if !slices.Contains(keys, c.key) {
			keys = append(keys, c.key)
		}
	}
	type wfState struct {
		cap, rate *int
		running   int
		starts    []time.Time // admissions in the window, oldest first
	}
	wf := make(map[string]*wfState, len(keys))
	for _, k := range keys {
		wf[k] = &wfState{}
	}
	rows, err = tx.Query(ctx, `SELECT workflow_key, max_concurrent_runs, max_starts_per_minute FROM workflow_limits
		WHERE tenant_id = $1 AND workflow_key = ANY($2)`, tenantID, keys)
	if err != nil {
		return adm, fmt.Errorf("store: admission limits: %w", err)
	}
	var rateKeys []string
	err = forEachRow(rows, func(r pgx.Rows) error {
		var k string
		var c, rate *int
		if err := r.Scan(&k, &c, &rate); err != nil {
			return err
		}
		wf[k].cap, wf[k].rate = c, rate
		if rate != nil {
			rateKeys = append(rateKeys, k)
		}
		return nil
	})
	if err != nil {
		return adm, fmt.Errorf("store: admission limits: %w", err)
	}
	tenantRunning := 0
	rows, err = tx.Query(ctx, `SELECT workflow_key, count(*) FROM runs
		WHERE tenant_id = $1 AND mode = 'live' AND status IN ('queued', 'running') GROUP BY workflow_key`, tenantID)
	if err != nil {
		return adm, fmt.Errorf("store: admission slots: %w", err)
	}
	err = forEachRow(rows, func(r pgx.Rows) error {
		var k string
		var n int
		if err := r.Scan(&k, &n); err != nil {
			return err
		}
		tenantRunning += n
		if w, ok := wf[k]; ok {
			w.running = n
		}
		return nil
	})
	if err != nil {
		return adm, fmt.Errorf("store: admission slots: %w", err)
	}
	if len(rateKeys) > 0 {
		rows, err = tx.Query(ctx, `SELECT workflow_key, admitted_at FROM runs
			WHERE tenant_id = $1 AND workflow_key = ANY($2) AND mode = 'live'
			  AND admitted_at > $3::timestamptz - $4::bigint * interval '1 microsecond'
			ORDER BY admitted_at`, tenantID, rateKeys, now, RateWindow.Microseconds())
		if err != nil {
			return adm, fmt.Errorf("store: admission rate: %w", err)
		}
		err = forEachRow(rows, func(r pgx.Rows) error {
			var k string
			var at time.Time
			if err := r.Scan(&k, &at); err != nil {
				return err
			}
			wf[k].starts = append(wf[k].starts, at)
			return nil
		})
		if err != nil {
			return adm, fmt.Errorf("store: admission rate: %w", err)
		}
	}

	var admitted []string
	for _, c := range cands {
		w := wf[c.key]
		switch {
		case tenantCap != nil && tenantRunning >= *tenantCap:
			adm.Reasons[c.runID] = ThrottleTenantConcurrency
		case w.cap != nil && w.running >= *w.cap:
			adm.Reasons[c.runID] = ThrottleWorkflowConcurrency
		case w.rate != nil && len(w.starts) >= *w.rate:
			adm.Reasons[c.runID] = ThrottleWorkflowStartRate
			// The window has room again once its oldest admission that
			// keeps it full leaves it.
			at := w.starts[len(w.starts)-*w.rate].Add(RateWindow)
			if adm.RetryAt == nil || at.Before(*adm.RetryAt) {
				adm.RetryAt = &at
			}
		default:
			admitted = append(admitted, c.runID)
			tenantRunning++
			w.running++
			w.starts = append(w.starts, now)
		}
	}
	// Runs behind a full tenant cap wait for it too.
	if tenantCap != nil && tenantRunning >= *tenantCap {
		for _, c := range cands {
			if _, waiting := adm.Reasons[c.runID]; waiting {
				adm.Reasons[c.runID] = ThrottleTenantConcurrency
			}
		}
	}
	if len(admitted) > 0 {
		// One statement per run, in queue order, so admitted_at follows
		// the queue even at microsecond resolution.
		batch := &pgx.Batch{}
		for _, id := range admitted {
			batch.Queue(`UPDATE runs SET status = 'queued', admitted_at = clock_timestamp(), updated_at = now()
				WHERE run_id = $1 AND status = 'throttled'`, id)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return adm, fmt.Errorf("store: admit: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = ANY($1) ORDER BY queue_seq`, admitted)
		if err != nil {
			return adm, fmt.Errorf("store: admitted runs: %w", err)
		}
		if adm.Admitted, err = collectRuns(rows); err != nil {
			return adm, fmt.Errorf("store: admitted runs: %w", err)
		}
		byID := map[string]candidate{}
		for _, c := range cands {
			byID[c.runID] = c
		}
		for _, r := range adm.Admitted {
			if r.RunID == fresh {
				continue
			}
			waited := now.Sub(byID[r.RunID].createdAt).Milliseconds()
			if err := appendRunEvent(ctx, tx, r.TenantID, r.RunID, execution.EventRunAdmitted, now,
				map[string]any{"waitedMs": max(waited, 0)}); err != nil {
				return adm, err
			}
		}
	}
	if reason, waiting := adm.Reasons[fresh]; waiting && fresh != "" {
		pos, err := queuePosition(ctx, tx, fresh)
		if err != nil {
			return adm, err
		}
		if err := appendRunEvent(ctx, tx, tenantID, fresh, execution.EventRunThrottled, now,
			map[string]any{"position": pos, "reason": reason}); err != nil {
			return adm, err
		}
	}
	return adm, nil
}

// queuePosition is a throttled run's place in its workflow's queue (1 is next).
func queuePosition(ctx context.Context, tx pgx.Tx, runID string) (int, error) {
	var pos int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM runs q, runs r
		WHERE r.run_id = $1 AND q.tenant_id = r.tenant_id AND q.workflow_key = r.workflow_key
		  AND q.status = 'throttled' AND q.queue_seq <= r.queue_seq`, runID).Scan(&pos)
	if err != nil {
		return 0, fmt.Errorf("store: queue position: %w", err)
	}
	return pos, nil
}

// appendRunEvent appends one run-level event the dispatcher writes, keyed
// <run>/-/0/<type>/0 (each happens once in a run's life).
func appendRunEvent(ctx context.Context, tx pgx.Tx, tenantID, runID, typ string, at time.Time, data map[string]any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	prepared, err := prepareEvents([]execution.EventDraft{{Key: fmt.Sprintf("%s/-/0/%s/0", runID, typ), Type: typ, At: at, Data: raw}})
	if err != nil {
		return err
	}
	if err := appendInTx(ctx, tx, tenantID, runID, prepared, nil, nil); err != nil {
		return fmt.Errorf("store: append %s: %w", typ, err)
	}
	return nil
}

func forEachRow(rows pgx.Rows, fn func(pgx.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// admitAndWake is admit for a pass that is not the dispatcher's own (an
// enqueue, a change of limits): when it leaves runs waiting only for a
// start rate, no settlement will wake a dispatcher for them, and the pass's
// RetryAt would be lost with its caller. It notifies SlotsChannel in tx
// (delivered at commit) so every RunDispatcher dispatches the tenant, learns
// the same RetryAt and arms its timer. Dispatch itself must not notify: the
// dispatcher would wake itself until the window opened.
func admitAndWake(ctx context.Context, tx pgx.Tx, tenantID, fresh string) (Admission, error) {
	adm, err := admit(ctx, tx, tenantID, fresh)
	if err != nil || adm.RetryAt == nil {
		return adm, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, SlotsChannel, tenantID); err != nil {
		return Admission{}, fmt.Errorf("store: wake the dispatchers of tenant %s: %w", tenantID, err)
	}
	return adm, nil
}

// Dispatch admits, in one transaction under the tenant's admission lock,
// the tenant's throttled runs that fit their limits now (see admit). The
// caller starts the admitted runs.
func (s *Store) Dispatch(ctx context.Context, tenantID string) (Admission, error) {
	var adm Admission
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := lockTenant(ctx, tx, tenantID); err != nil {
			return err
		}
		var err error
		adm, err = admit(ctx, tx, tenantID, "")
		return err
	})
	if err != nil {
		return Admission{}, fmt.Errorf("store: dispatch tenant %s: %w", tenantID, err)
	}
	return adm, nil
}

// ThrottledTenants lists the tenants with runs waiting for a slot (the
// sweeper's safety net dispatches each of them).
func (s *Store) ThrottledTenants(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `SELECT DISTINCT tenant_id FROM runs WHERE status = 'throttled' LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: throttled tenants: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: throttled tenants: %w", err)
	}
	return out, nil
}

// CancelThrottled cancels a run that is still throttled, without it ever
// starting: under the tenant's admission lock (so no dispatcher admits it
// meanwhile) it appends run.cancelled with err and settles the row. It
// reports false, changing nothing, when the run is no longer throttled (it
// was admitted, or has ended): the caller cancels it through Temporal. A
// run of another tenant is failure.ErrNotFound.
func (s *Store) CancelThrottled(ctx context.Context, tenantID, runID string, runErr execution.RunError, data map[string]any) (bool, error) {
	cancelled := false
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := lockTenant(ctx, tx, tenantID); err != nil {
			return err
		}
		// Only the holders of the admission lock write to a throttled run;
		// a row locked by anyone else (a run admitted meanwhile, now
		// appending its events) is not throttled any more, and waiting for
		// it while holding the lock could deadlock with its settlement.
		var status string
		err := tx.QueryRow(ctx, `SELECT status FROM runs WHERE run_id = $1 AND tenant_id = $2 FOR UPDATE SKIP LOCKED`,
			runID, tenantID).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			var one int
			return notFound(tx.QueryRow(ctx, `SELECT 1 FROM runs WHERE run_id = $1 AND tenant_id = $2`, runID, tenantID).Scan(&one))
		}
		if err != nil {
			return err
		}
		if status != execution.StatusThrottled {
			return nil
		}
		if data == nil {
			data = map[string]any{}
		}
		data["runError"] = runErr
		raw, err := json.Marshal(data)
		if err != nil {
			return err
		}
		at := time.Now().UTC()
		prepared, err := prepareEvents([]execution.EventDraft{{Key: fmt.Sprintf("%s/-/0/%s/throttled", runID, execution.EventRunCancelled),
			Type: execution.EventRunCancelled, At: at, Data: raw}})
		if err != nil {
			return err
		}
		upd := &execution.RunUpdate{Status: execution.StatusCancelled, Error: &runErr}
		if err := appendInTx(ctx, tx, tenantID, runID, prepared, upd, &at); err != nil {
			return err
		}
		cancelled = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: cancel throttled run %s: %w", runID, err)
	}
	return cancelled, nil
}

// GetWorkflowLimits returns the limits of workflow key; a workflow without
// any has a zero WorkflowLimits (no limit). A workflow that does not exist
// is failure.ErrNotFound.
func (s *Store) GetWorkflowLimits(ctx context.Context, tenantID, key string) (WorkflowLimits, error) {
	l := WorkflowLimits{TenantID: tenantID, WorkflowKey: key}
	var by *string
	var at *time.Time
	err := s.Pool.QueryRow(ctx, `SELECT l.max_concurrent_runs, l.max_starts_per_minute, l.budget_max_tokens,
			l.budget_max_cost_usd, l.updated_by, l.updated_at
		FROM workflows w LEFT JOIN workflow_limits l ON l.tenant_id = w.tenant_id AND l.workflow_key = w.key
		WHERE w.tenant_id = $1 AND w.key = $2`, tenantID, key).
		Scan(&l.MaxConcurrentRuns, &l.MaxStartsPerMinute, &l.Budget.MaxTokens, &l.Budget.MaxCostUSD, &by, &at)
	if err != nil {
		return WorkflowLimits{}, notFound(err)
	}
	if by != nil {
		l.UpdatedBy = *by
	}
	if at != nil {
		l.UpdatedAt = *at
	}
	return l, nil
}

// ListWorkflowLimits returns the limits set on the tenant's workflows, in
// key order (workflows whose limits were never set are absent).
func (s *Store) ListWorkflowLimits(ctx context.Context, tenantID string) ([]WorkflowLimits, error) {
	rows, err := s.Pool.Query(ctx, `SELECT workflow_key, max_concurrent_runs, max_starts_per_minute, budget_max_tokens,
			budget_max_cost_usd, updated_by, updated_at
		FROM workflow_limits WHERE tenant_id = $1 ORDER BY workflow_key`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("store: list workflow limits: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkflowLimits, error) {
		l := WorkflowLimits{TenantID: tenantID}
		err := r.Scan(&l.WorkflowKey, &l.MaxConcurrentRuns, &l.MaxStartsPerMinute, &l.Budget.MaxTokens, &l.Budget.MaxCostUSD,
			&l.UpdatedBy, &l.UpdatedAt)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list workflow limits: %w", err)
	}
	return out, nil
}

// GetTenantLimits returns the tenant's limits (zero when never set).
func (s *Store) GetTenantLimits(ctx context.Context, tenantID string) (TenantLimits, error) {
	l := TenantLimits{TenantID: tenantID}
	err := s.Pool.QueryRow(ctx, `SELECT max_concurrent_runs, updated_by, updated_at FROM tenant_limits WHERE tenant_id = $1`,
		tenantID).Scan(&l.MaxConcurrentRuns, &l.UpdatedBy, &l.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, nil
	}
	if err != nil {
		return TenantLimits{}, fmt.Errorf("store: tenant limits: %w", err)
	}
	return l, nil
}

// validateLimit refuses a cap outside 1..max (nil is no limit).
func validateLimit(field string, v *int, maxV int) error {
	if v != nil && (*v < 1 || *v > maxV) {
		return failure.New(failure.CodeInvalidRequest, "%s must be an integer from 1 to %d, or null for no limit", field, maxV).
			WithDetails(map[string]any{"field": field})
	}
	return nil
}

// SetWorkflowLimits replaces the limits of workflow l.WorkflowKey (every
// field: a nil one removes that limit) and, in the same transaction under
// the tenant's admission lock, admits the throttled runs the new limits
// make room for: the caller starts Admission.Admitted. A cap lowered below
// what runs hold now never stops them; new runs wait until enough settle.
// A workflow that does not exist is failure.ErrNotFound.
func (s *Store) SetWorkflowLimits(ctx context.Context, l WorkflowLimits) (WorkflowLimits, Admission, error) {
	if err := validateLimit("maxConcurrentRuns", l.MaxConcurrentRuns, MaxConcurrentRunsLimit); err != nil {
		return WorkflowLimits{}, Admission{}, err
	}
	if err := validateLimit("maxStartsPerMinute", l.MaxStartsPerMinute, MaxStartsPerMinuteLimit); err != nil {
		return WorkflowLimits{}, Admission{}, err
	}
	if err := l.Budget.Validate("budget"); err != nil {
		return WorkflowLimits{}, Admission{}, err
	}
	if l.UpdatedBy == "" {
		return WorkflowLimits{}, Admission{}, failure.New(failure.CodeInvalidRequest, "limits need who set them")
	}
	var adm Admission
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := lockTenant(ctx, tx, l.TenantID); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `INSERT INTO workflow_limits (tenant_id, workflow_key, max_concurrent_runs, max_starts_per_minute,
				budget_max_tokens, budget_max_cost_usd, updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, now())
			ON CONFLICT (tenant_id, workflow_key) DO UPDATE SET
				max_concurrent_runs = EXCLUDED.max_concurrent_runs, max_starts_per_minute = EXCLUDED.max_starts_per_minute,
				budget_max_tokens = EXCLUDED.budget_max_tokens, budget_max_cost_usd = EXCLUDED.budget_max_cost_usd,
				updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at
			RETURNING updated_at`,
			l.TenantID, l.WorkflowKey, l.MaxConcurrentRuns, l.MaxStartsPerMinute, l.Budget.MaxTokens, l.Budget.MaxCostUSD,
			l.UpdatedBy).Scan(&l.UpdatedAt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: no such workflow
			return failure.ErrNotFound
		}
		if err != nil {
			return err
		}
		adm, err = admitAndWake(ctx, tx, l.TenantID, "")
		return err
	})
	if err != nil {
		if errors.Is(err, failure.ErrNotFound) {
			return WorkflowLimits{}, Admission{}, err
		}
		return WorkflowLimits{}, Admission{}, fmt.Errorf("store: set workflow limits: %w", err)
	}
	return l, adm, nil
}

// SetTenantLimits replaces the tenant's limits and admits what they make
// room for, like SetWorkflowLimits.
func (s *Store) SetTenantLimits(ctx context.Context, l TenantLimits) (TenantLimits, Admission, error) {
	if err := validateLimit("maxConcurrentRuns", l.MaxConcurrentRuns, MaxConcurrentRunsLimit); err != nil {
		return TenantLimits{}, Admission{}, err
	}
	if l.UpdatedBy == "" {
		return TenantLimits{}, Admission{}, failure.New(failure.CodeInvalidRequest, "limits need who set them")
	}
	var adm Admission
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := lockTenant(ctx, tx, l.TenantID); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `INSERT INTO tenant_limits (tenant_id, max_concurrent_runs, updated_by, updated_at)
			VALUES ($1, $2, $3, now())
			ON CONFLICT (tenant_id) DO UPDATE SET max_concurrent_runs = EXCLUDED.max_concurrent_runs,
				updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at
			RETURNING updated_at`, l.TenantID, l.MaxConcurrentRuns, l.UpdatedBy).Scan(&l.UpdatedAt)
		if err != nil {
			return err
		}
		adm, err = admitAndWake(ctx, tx, l.TenantID, "")
		return err
	})
	if err != nil {
		return TenantLimits{}, Admission{}, fmt.Errorf("store: set tenant limits: %w", err)
	}
	return l, adm, nil
}

// LimitsUsage reads what the tenant's live runs hold of its limits now:
// the slots held and the runs waiting, for the tenant and per workflow, and
// the admissions in the rate window of the workflows in keys and of those
// with runs holding or waiting for a slot. Every query is bounded by an
// index over the runs that are not settled yet, or over one workflow's
// admissions, never by the tenant's whole history.
func (s *Store) LimitsUsage(ctx context.Context, tenantID string, keys []string) (LimitsUsage, error) {
	u := LimitsUsage{Workflows: map[string]WorkflowUsage{}}
	rows, err := s.Pool.Query(ctx, `
		SELECT workflow_key, count(*), 0 FROM runs
		 WHERE tenant_id = $1 AND mode = 'live' AND status IN ('queued', 'running') GROUP BY workflow_key
		UNION ALL
		SELECT workflow_key, 0, count(*) FROM runs
		 WHERE tenant_id = $1 AND status = 'throttled' GROUP BY workflow_key`, tenantID)
	if err != nil {
		return u, fmt.Errorf("store: limits usage: %w", err)
	}
	err = forEachRow(rows, func(r pgx.Rows) error {
		var k string
		var running, throttled int
		if err := r.Scan(&k, &running, &throttled); err != nil {
			return err
		}
		w := u.Workflows[k]
		w.Running += running
		w.Throttled += throttled
		u.Workflows[k] = w
		u.Running += running
		u.Throttled += throttled
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("store: limits usage: %w", err)
	}
	all := slices.Clone(keys)
	for k := range u.Workflows {
		if !slices.Contains(all, k) {
			all = append(all, k)
		}
	}
	if len(all) == 0 {
		return u, nil
	}
	rows, err = s.Pool.Query(ctx, `SELECT workflow_key, count(*) FROM runs
		WHERE tenant_id = $1 AND workflow_key = ANY($2) AND mode = 'live'
		  AND admitted_at > now() - $3::bigint * interval '1 microsecond'
		GROUP BY workflow_key`, tenantID, all, RateWindow.Microseconds())
	if err != nil {
		return u, fmt.Errorf("store: limits usage: %w", err)
	}
	err = forEachRow(rows, func(r pgx.Rows) error {
		var k string
		var n int
		if err := r.Scan(&k, &n); err != nil {
			return err
		}
		w := u.Workflows[k]
		w.StartsInWindow = n
		u.Workflows[k] = w
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("store: limits usage: %w", err)
	}
	return u, nil
}
