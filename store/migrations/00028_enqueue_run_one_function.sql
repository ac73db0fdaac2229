-- +goose Up
-- weft_enqueue_run_checked (migration 00024) made a new run in eight SQL
-- statements, each planned once per session but started and ended by the
-- executor on every call: its check, then the call of weft_enqueue_run
-- (00021, its answer materialized once more), whose body ran
-- weft_limits_apply's query, claimed the binding, took the admission lock,
-- ran weft_limits_apply's query again under it, inserted the run and read
-- it back (docs/benchmarks.md, Session 15: enqueue CPU). The same
-- function, same signature, now makes the same decisions in ONE body of
-- three statements for a new run (three for a bound key too):
--
--   1. one SELECT, in one snapshot, of what the enqueue was decided with
--      (00024's check, unchanged: the revision named or the latest
--      published with its checksum, the workflow's default budget, the
--      revocations of p_revoked_of) and, for a live run without
--      p_exclusive, whether limits apply (weft_limits_apply's three
--      tests). Changed: WF002; else limits: WF001; both before writing
--      anything, in that order, as before.
--   2. the claim of the binding (INSERT ... ON CONFLICT DO NOTHING: one run
--      however many race for a key), whose RETURNING takes a new live
--      run's tenant admission lock (exclusive with p_exclusive, else
--      shared): the lock is taken after the claim, as before, and the next
--      statement's snapshot is taken under it. A key bound already takes
--      no lock and is answered with its bound run, created = false, in
--      one SELECT (no row when retention deleted the run).
--   3. the run's insert, only when limits do not apply (a live run without
--      p_exclusive; checked in the insert's own snapshot, under the shared
--      lock), returning its row (store.runColumns, column for column)
--      instead of reading it back. Nothing inserted: limits appeared while
--      it waited for the lock, WF001, rolling the claim back.
--
-- A waiting run's place (o_position) counts the runs waiting before it in
-- the insert's snapshot, which does not see the run itself: 1 + that.
-- weft_enqueue_run and weft_limits_apply stay for store.EnqueueRun (no
-- expectations) and a previous release during a rolling deploy.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION weft_enqueue_run_checked(
    p_run text, p_tenant text, p_key text, p_idempotency_key text, p_revision integer, p_draft_revision integer,
    p_checksum text, p_mode text, p_input jsonb, p_input_hash text, p_origin jsonb, p_actor jsonb,
    p_permissions text[], p_fixtures jsonb, p_workflow_id text, p_usage jsonb, p_tenant_name text,
    p_tool_grants text[], p_tool_policy text[], p_budget jsonb, p_budget_max_tokens bigint,
    p_budget_max_cost_usd numeric, p_exclusive boolean,
    p_named_revision integer, p_limit_tokens bigint, p_limit_cost float8, p_revoked_of text, p_revoked text[])
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
    v_holds   boolean;
    v_limited boolean;
    v_locked  boolean;
BEGIN
    SELECT EXISTS (
            SELECT 1 FROM workflows w
              JOIN workflow_revisions r ON r.tenant_id = w.tenant_id AND r.key = w.key
               AND r.revision = COALESCE(p_named_revision, w.latest_published_revision)
              LEFT JOIN workflow_limits l ON l.tenant_id = w.tenant_id AND l.workflow_key = w.key
             WHERE w.tenant_id = p_tenant AND w.key = p_key AND r.revision = p_revision AND r.checksum = p_checksum
               AND l.budget_max_tokens IS NOT DISTINCT FROM p_limit_tokens
               AND l.budget_max_cost_usd::float8 IS NOT DISTINCT FROM p_limit_cost)
        AND (p_revoked_of IS NULL OR ARRAY(SELECT v.scope FROM revocations v
                WHERE v.tenant_id = p_tenant AND v.sub = p_revoked_of ORDER BY v.scope) IS NOT DISTINCT FROM p_revoked),
        v_live AND NOT p_exclusive AND (
            EXISTS (SELECT 1 FROM tenant_limits WHERE tenant_id = p_tenant AND max_concurrent_runs IS NOT NULL)
            OR EXISTS (SELECT 1 FROM workflow_limits WHERE tenant_id = p_tenant AND workflow_key = p_key
                       AND (max_concurrent_runs IS NOT NULL OR max_starts_per_minute IS NOT NULL))
            OR EXISTS (SELECT 1 FROM runs WHERE tenant_id = p_tenant AND workflow_key = p_key AND status = 'throttled'))
      INTO v_holds, v_limited;
    IF NOT v_holds THEN
        RAISE EXCEPTION 'weft: the revision, default budget or revocations this enqueue was decided with changed'
            USING ERRCODE = 'WF002';
    END IF;
    IF v_limited THEN
        RAISE EXCEPTION 'weft: limits apply to this enqueue' USING ERRCODE = 'WF001';
    END IF;
    INSERT INTO idempotency_bindings (tenant_id, workflow_key, idempotency_key, run_id, checksum, input_hash, mode)
    VALUES (p_tenant, p_key, p_idempotency_key, p_run, p_checksum, p_input_hash, p_mode)
    ON CONFLICT (tenant_id, workflow_key, idempotency_key) DO NOTHING
    RETURNING CASE WHEN NOT v_live THEN true
                   WHEN p_exclusive THEN pg_advisory_xact_lock(2003134068, hashtext(p_tenant)) IS NOT NULL
                   ELSE pg_advisory_xact_lock_shared(2003134068, hashtext(p_tenant)) IS NOT NULL END
      INTO v_locked;
    IF NOT FOUND THEN
        -- store.runColumns, column for column.
        RETURN QUERY SELECT false, r.run_id, r.tenant_id, r.tenant_name, r.workflow_key, r.revision,
            r.draft_revision, r.checksum, r.mode, r.status, r.input, r.input_hash, r.output, r.error, r.origin,
            r.actor, r.permissions, r.fixtures, r.workflow_id, COALESCE(r.temporal_run_id, ''), r.usage,
            r.created_at, r.started_at, r.finished_at, r.tool_grants, r.tool_policy, r.admitted_at, r.budget,
            r.budget_max_tokens, r.budget_max_cost_usd::float8,
            CASE WHEN r.status = 'throttled' THEN (SELECT count(*) FROM runs q WHERE q.tenant_id = r.tenant_id
                AND q.workflow_key = r.workflow_key AND q.status = 'throttled' AND q.queue_seq <= r.queue_seq) ELSE 0 END
          FROM idempotency_bindings b JOIN runs r ON r.run_id = b.run_id
         WHERE b.tenant_id = p_tenant AND b.workflow_key = p_key AND b.idempotency_key = p_idempotency_key;
        RETURN;
    END IF;
    RETURN QUERY INSERT INTO runs AS n (run_id, tenant_id, workflow_key, revision, draft_revision, checksum, mode, status,
        input, input_hash, origin, actor, permissions, fixtures, workflow_id, usage, tenant_name,
        tool_grants, tool_policy, budget, budget_max_tokens, budget_max_cost_usd,
        queue_seq, admitted_at, created_at)
    SELECT p_run, p_tenant, p_key, p_revision, p_draft_revision, p_checksum, p_mode,
        CASE WHEN v_live AND p_exclusive THEN 'throttled' ELSE 'queued' END,
        p_input, p_input_hash, p_origin, p_actor, p_permissions, p_fixtures, p_workflow_id, p_usage, p_tenant_name,
        p_tool_grants, p_tool_policy, p_budget, p_budget_max_tokens, p_budget_max_cost_usd,
        CASE WHEN v_live AND p_exclusive THEN nextval('run_queue_seq') END,
        CASE WHEN NOT (v_live AND p_exclusive) THEN clock_timestamp() END, clock_timestamp()
     WHERE NOT (v_live AND NOT p_exclusive AND (
            EXISTS (SELECT 1 FROM tenant_limits WHERE tenant_id = p_tenant AND max_concurrent_runs IS NOT NULL)
            OR EXISTS (SELECT 1 FROM workflow_limits WHERE tenant_id = p_tenant AND workflow_key = p_key
                       AND (max_concurrent_runs IS NOT NULL OR max_starts_per_minute IS NOT NULL))
            OR EXISTS (SELECT 1 FROM runs WHERE tenant_id = p_tenant AND workflow_key = p_key AND status = 'throttled')))
    RETURNING true, n.run_id, n.tenant_id, n.tenant_name, n.workflow_key, n.revision,
        n.draft_revision, n.checksum, n.mode, n.status, n.input, n.input_hash, n.output, n.error, n.origin,
        n.actor, n.permissions, n.fixtures, n.workflow_id, COALESCE(n.temporal_run_id, ''), n.usage,
        n.created_at, n.started_at, n.finished_at, n.tool_grants, n.tool_policy, n.admitted_at, n.budget,
        n.budget_max_tokens, n.budget_max_cost_usd::float8,
        CASE WHEN n.status = 'throttled' THEN 1 + (SELECT count(*) FROM runs q WHERE q.tenant_id = n.tenant_id
            AND q.workflow_key = n.workflow_key AND q.status = 'throttled' AND q.queue_seq <= n.queue_seq) ELSE 0 END;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'weft: limits changed during the enqueue' USING ERRCODE = 'WF001';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- weft_enqueue_run_checked as migration 00024 defined it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION weft_enqueue_run_checked(
    p_run text, p_tenant text, p_key text, p_idempotency_key text, p_revision integer, p_draft_revision integer,
    p_checksum text, p_mode text, p_input jsonb, p_input_hash text, p_origin jsonb, p_actor jsonb,
    p_permissions text[], p_fixtures jsonb, p_workflow_id text, p_usage jsonb, p_tenant_name text,
    p_tool_grants text[], p_tool_policy text[], p_budget jsonb, p_budget_max_tokens bigint,
    p_budget_max_cost_usd numeric, p_exclusive boolean,
    p_named_revision integer, p_limit_tokens bigint, p_limit_cost float8, p_revoked_of text, p_revoked text[])
RETURNS TABLE (o_created boolean, o_run_id text, o_tenant_id text, o_tenant_name text, o_workflow_key text,
    o_revision integer, o_draft_revision integer, o_checksum text, o_mode text, o_status text, o_input jsonb,
    o_input_hash text, o_output jsonb, o_error jsonb, o_origin jsonb, o_actor jsonb, o_permissions text[],
    o_fixtures jsonb, o_workflow_id text, o_temporal_run_id text, o_usage jsonb, o_created_at timestamptz,
    o_started_at timestamptz, o_finished_at timestamptz, o_tool_grants text[], o_tool_policy text[],
    o_admitted_at timestamptz, o_budget jsonb, o_budget_max_tokens bigint, o_budget_max_cost_usd float8,
    o_position bigint)
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM workflows w
          JOIN workflow_revisions r ON r.tenant_id = w.tenant_id AND r.key = w.key
           AND r.revision = COALESCE(p_named_revision, w.latest_published_revision)
          LEFT JOIN workflow_limits l ON l.tenant_id = w.tenant_id AND l.workflow_key = w.key
         WHERE w.tenant_id = p_tenant AND w.key = p_key AND r.revision = p_revision AND r.checksum = p_checksum
           AND l.budget_max_tokens IS NOT DISTINCT FROM p_limit_tokens
           AND l.budget_max_cost_usd::float8 IS NOT DISTINCT FROM p_limit_cost)
    OR (p_revoked_of IS NOT NULL AND ARRAY(SELECT v.scope FROM revocations v
            WHERE v.tenant_id = p_tenant AND v.sub = p_revoked_of ORDER BY v.scope) IS DISTINCT FROM p_revoked) THEN
        RAISE EXCEPTION 'weft: the revision, default budget or revocations this enqueue was decided with changed'
            USING ERRCODE = 'WF002';
    END IF;
    RETURN QUERY SELECT * FROM weft_enqueue_run(p_run, p_tenant, p_key, p_idempotency_key, p_revision,
        p_draft_revision, p_checksum, p_mode, p_input, p_input_hash, p_origin, p_actor, p_permissions, p_fixtures,
        p_workflow_id, p_usage, p_tenant_name, p_tool_grants, p_tool_policy, p_budget, p_budget_max_tokens,
        p_budget_max_cost_usd, p_exclusive);
END
$$;
-- +goose StatementEnd
