-- +goose Up
-- weft_enqueue_run_checked is weft_enqueue_run (migration 00021) behind a
-- check of what the caller decided the enqueue with, in the same
-- statement, so an enqueue whose reads come from the starter's cache is
-- ONE round trip and still decides exactly as one that read them first.
-- The starter validated the input against a revision's schema, checked the
-- node permissions against the actor's revocations and filled the run's
-- budget from the workflow's default budget; the check confirms, in the
-- statement's own snapshot (taken after everything committed before it),
-- that
--
--   * the revision it runs is still the one named (p_named_revision), or
--     the workflow's latest published one when none is named, with the
--     checksum it validated against (p_revision, p_checksum);
--   * the workflow's default budget is still p_limit_tokens and
--     p_limit_cost (NULL: none set);
--   * the scopes revoked from p_revoked_of are still exactly p_revoked, in
--     the order revokedScopesSQL reads them (p_revoked_of NULL: a
--     simulation, which checks no node permissions).
--
-- Otherwise it raises WF002 and writes nothing: the caller reads all of
-- them again and decides again (store.ErrEnqueueReadsChanged). A
-- revocation, a publish or a change of the default budget therefore takes
-- effect for every enqueue whose statement starts after it committed,
-- whatever the cache held, with no invalidation protocol.
--
-- weft_enqueue_run stays for its other callers (store.EnqueueRun without
-- expectations) and a previous release during a rolling deploy.
-- +goose StatementBegin
CREATE FUNCTION weft_enqueue_run_checked(
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

-- +goose Down
DROP FUNCTION weft_enqueue_run_checked(text, text, text, text, integer, integer, text, text, jsonb, text, jsonb, jsonb,
    text[], jsonb, text, jsonb, text, text[], text[], jsonb, bigint, numeric, boolean,
    integer, bigint, float8, text, text[]);
