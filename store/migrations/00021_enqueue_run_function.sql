-- +goose Up
-- weft_enqueue_run persists a new run with its idempotency binding in ONE
-- statement, so a live enqueue of a tenant without limits (the hot path) is
-- one round trip instead of a transaction of eight (BEGIN, claim, limits
-- check, shared lock, check again, insert, read back, COMMIT). It makes
-- exactly the decisions store.EnqueueRun made in Go before:
--
--   * It claims the binding (tenant, workflow key, idempotency key) with
--     INSERT ... ON CONFLICT DO NOTHING: PostgreSQL makes concurrent
--     claimers of one key wait for the first, so one run is created however
--     many race. A key bound already inserts nothing and returns the bound
--     run with created = false; no row at all when that run is gone
--     (retention deleted it: the binding outlives it).
--   * A simulation run is exempt from limits: inserted queued, no lock.
--   * A live run, p_exclusive false: when its tenant or workflow has a cap,
--     or runs of its workflow wait already (weft_limits_apply), it raises
--     WF001 before writing anything; otherwise it takes the tenant's
--     admission lock shared, checks again under it (a change of limits
--     holds the lock exclusively while it commits) and inserts the run
--     queued, admitted now. Limits that appeared in between also raise
--     WF001, rolling the claim back. The caller (store.EnqueueRun) then
--     enqueues with p_exclusive true.
--   * A live run, p_exclusive true (inside the caller's transaction): the
--     tenant's exclusive admission lock, and the run inserted throttled at
--     the end of the queue; the caller runs the admission pass (store.admit)
--     in the same transaction, which queues it at once when a slot is free.
--
-- The lock is the one store.admit and the trigger runs_slot_freed take
-- (2003134068 = "weft", hashtext(tenant)). created_at is taken under it, so
-- the queue (queue_seq) and createdAt agree on who came first. The row it
-- returns has exactly the columns of store.runColumns, computed inside the
-- function (a new snapshot per statement: it sees the run it inserted, and
-- a bound run another transaction committed while the claim waited).
-- +goose StatementBegin
CREATE FUNCTION weft_limits_apply(p_tenant text, p_key text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- PL/pgSQL, not SQL: its plan is cached for the session instead of
    -- being planned again in every enqueue's transaction.
    RETURN EXISTS (SELECT 1 FROM tenant_limits WHERE tenant_id = p_tenant AND max_concurrent_runs IS NOT NULL)
        OR EXISTS (SELECT 1 FROM workflow_limits WHERE tenant_id = p_tenant AND workflow_key = p_key
                   AND (max_concurrent_runs IS NOT NULL OR max_starts_per_minute IS NOT NULL))
        OR EXISTS (SELECT 1 FROM runs WHERE tenant_id = p_tenant AND workflow_key = p_key AND status = 'throttled');
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION weft_enqueue_run(
    p_run text, p_tenant text, p_key text, p_idempotency_key text, p_revision integer, p_draft_revision integer,
    p_checksum text, p_mode text, p_input jsonb, p_input_hash text, p_origin jsonb, p_actor jsonb,
    p_permissions text[], p_fixtures jsonb, p_workflow_id text, p_usage jsonb, p_tenant_name text,
    p_tool_grants text[], p_tool_policy text[], p_budget jsonb, p_budget_max_tokens bigint,
    p_budget_max_cost_usd numeric, p_exclusive boolean)
RETURNS TABLE (o_created boolean, o_run_id text, o_tenant_id text, o_tenant_name text, o_workflow_key text,
    o_revision integer, o_draft_revision integer, o_checksum text, o_mode text, o_status text, o_input jsonb,
    o_input_hash text, o_output jsonb, o_error jsonb, o_origin jsonb, o_actor jsonb, o_permissions text[],
    o_fixtures jsonb, o_workflow_id text, o_temporal_run_id text, o_usage jsonb, o_created_at timestamptz,
    o_started_at timestamptz, o_finished_at timestamptz, o_tool_grants text[], o_tool_policy text[],
    o_admitted_at timestamptz, o_budget jsonb, o_budget_max_tokens bigint, o_budget_max_cost_usd float8,
    o_position bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_live    boolean := p_mode = 'live';
    v_queued  boolean := true;
    v_created boolean := true;
    v_run     text := p_run;
BEGIN
    IF v_live AND NOT p_exclusive AND weft_limits_apply(p_tenant, p_key) THEN
        RAISE EXCEPTION 'weft: limits apply to this enqueue' USING ERRCODE = 'WF001';
    END IF;
    INSERT INTO idempotency_bindings (tenant_id, workflow_key, idempotency_key, run_id, checksum, input_hash, mode)
    VALUES (p_tenant, p_key, p_idempotency_key, p_run, p_checksum, p_input_hash, p_mode)
    ON CONFLICT (tenant_id, workflow_key, idempotency_key) DO NOTHING;
    IF NOT FOUND THEN
        v_created := false;
        SELECT b.run_id INTO v_run FROM idempotency_bindings b
         WHERE b.tenant_id = p_tenant AND b.workflow_key = p_key AND b.idempotency_key = p_idempotency_key;
    ELSIF v_live AND p_exclusive THEN
        PERFORM pg_advisory_xact_lock(2003134068, hashtext(p_tenant));
        v_queued := false;
    ELSIF v_live THEN
        PERFORM pg_advisory_xact_lock_shared(2003134068, hashtext(p_tenant));
        IF weft_limits_apply(p_tenant, p_key) THEN
            RAISE EXCEPTION 'weft: limits changed during the enqueue' USING ERRCODE = 'WF001';
        END IF;
    END IF;
    IF v_created THEN
        INSERT INTO runs (run_id, tenant_id, workflow_key, revision, draft_revision, checksum, mode, status,
            input, input_hash, origin, actor, permissions, fixtures, workflow_id, usage, tenant_name,
            tool_grants, tool_policy, budget, budget_max_tokens, budget_max_cost_usd,
            queue_seq, admitted_at, created_at)
        VALUES (p_run, p_tenant, p_key, p_revision, p_draft_revision, p_checksum, p_mode,
            CASE WHEN v_queued THEN 'queued' ELSE 'throttled' END,
            p_input, p_input_hash, p_origin, p_actor, p_permissions, p_fixtures, p_workflow_id, p_usage, p_tenant_name,
            p_tool_grants, p_tool_policy, p_budget, p_budget_max_tokens, p_budget_max_cost_usd,
            CASE WHEN v_queued THEN NULL ELSE nextval('run_queue_seq') END,
            CASE WHEN v_queued THEN clock_timestamp() END, clock_timestamp());
    END IF;
    -- store.runColumns, column for column.
    RETURN QUERY SELECT v_created, r.run_id, r.tenant_id, r.tenant_name, r.workflow_key, r.revision,
        r.draft_revision, r.checksum, r.mode, r.status, r.input, r.input_hash, r.output, r.error, r.origin,
        r.actor, r.permissions, r.fixtures, r.workflow_id, COALESCE(r.temporal_run_id, ''), r.usage,
        r.created_at, r.started_at, r.finished_at, r.tool_grants, r.tool_policy, r.admitted_at, r.budget,
        r.budget_max_tokens, r.budget_max_cost_usd::float8,
        CASE WHEN r.status = 'throttled' THEN (SELECT count(*) FROM runs q WHERE q.tenant_id = r.tenant_id
            AND q.workflow_key = r.workflow_key AND q.status = 'throttled' AND q.queue_seq <= r.queue_seq) ELSE 0 END
      FROM runs r WHERE r.run_id = v_run;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION weft_enqueue_run(text, text, text, text, integer, integer, text, text, jsonb, text, jsonb, jsonb,
    text[], jsonb, text, jsonb, text, text[], text[], jsonb, bigint, numeric, boolean);
DROP FUNCTION weft_limits_apply(text, text);
