-- +goose Up
-- Authorization on every tool call (issue 12).
--
-- runs.tool_grants: the optional toolGrants of the enqueue (actionId@version
-- list) narrowing what the run's agents may call; NULL when none were given
-- (no narrowing), '{}' when the enqueue granted no tool. Part of the
-- idempotency binding (the starter compares it on a repeated key).
-- runs.tool_policy: a schedule's or webhook's tool policy when it fired
-- (NULL for user runs), so a policy widened later never elevates a run
-- already started; the bridge's current policy narrows it further at every
-- tool call.
ALTER TABLE runs ADD COLUMN tool_grants text[];
ALTER TABLE runs ADD COLUMN tool_policy text[];

-- A schedule or webhook offers its runs' agents only the tools of its
-- explicit, revocable tool policy (actionId@version list); new ones default
-- to none.
ALTER TABLE schedules ADD COLUMN tool_policy text[] NOT NULL DEFAULT '{}';
ALTER TABLE schedules ADD COLUMN tool_policy_updated_by text NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN tool_policy_updated_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE webhooks ADD COLUMN tool_policy text[] NOT NULL DEFAULT '{}';
ALTER TABLE webhooks ADD COLUMN tool_policy_updated_by text NOT NULL DEFAULT '';
ALTER TABLE webhooks ADD COLUMN tool_policy_updated_at timestamptz NOT NULL DEFAULT now();

-- Existing schedules and webhooks keep working: each gets, listed
-- explicitly so an operator can narrow it, the policy equal to what its runs
-- could use before, when every tool whose required permissions the
-- creator's effective scopes held was offered: every runnable (read or
-- workspace-write) action contract that workers published, plus those the
-- bridge's workflow pinned in a published revision (built-ins a worker may
-- not have published to this database yet), whose requiredPermissions are
-- all in the creator's scope snapshot and none revoked from the creator now.
CREATE TEMPORARY TABLE tool_candidates ON COMMIT DROP AS
    SELECT NULL::text AS tenant_id, NULL::text AS workflow_key,
           c.action_id || '@' || c.version AS ref, c.risk,
           COALESCE(c.contract -> 'requiredPermissions', '[]'::jsonb) AS perms
      FROM action_contracts c
    UNION
    SELECT wr.tenant_id, wr.key,
           (a ->> 'id') || '@' || (a ->> 'version'), a ->> 'risk',
           COALESCE(a -> 'requiredPermissions', '[]'::jsonb)
      FROM workflow_revisions wr
      JOIN compiled_revisions cr ON cr.tenant_id = wr.tenant_id AND cr.checksum = wr.checksum
     CROSS JOIN LATERAL jsonb_array_elements(COALESCE(cr.compiled -> 'actions', '[]'::jsonb)) a;

UPDATE schedules s SET
    tool_policy = ARRAY(
        SELECT DISTINCT t.ref FROM tool_candidates t
         WHERE (t.tenant_id IS NULL OR (t.tenant_id = s.tenant_id AND t.workflow_key = s.workflow_key))
           AND t.risk IN ('read', 'workspace-write')
           AND NOT EXISTS (
               SELECT 1 FROM jsonb_array_elements_text(t.perms) p(scope)
                WHERE NOT (p.scope = ANY (s.scopes))
                   OR EXISTS (SELECT 1 FROM revocations r
                               WHERE r.tenant_id = s.tenant_id AND r.sub = s.created_by AND r.scope = p.scope))
         ORDER BY t.ref),
    tool_policy_updated_by = 'migration 00007 (what it could use before)',
    tool_policy_updated_at = now();

UPDATE webhooks w SET
    tool_policy = ARRAY(
        SELECT DISTINCT t.ref FROM tool_candidates t
         WHERE (t.tenant_id IS NULL OR (t.tenant_id = w.tenant_id AND t.workflow_key = w.workflow_key))
           AND t.risk IN ('read', 'workspace-write')
           AND NOT EXISTS (
               SELECT 1 FROM jsonb_array_elements_text(t.perms) p(scope)
                WHERE NOT (p.scope = ANY (w.scopes))
                   OR EXISTS (SELECT 1 FROM revocations r
                               WHERE r.tenant_id = w.tenant_id AND r.sub = w.created_by AND r.scope = p.scope))
         ORDER BY t.ref),
    tool_policy_updated_by = 'migration 00007 (what it could use before)',
    tool_policy_updated_at = now();

-- Notes record who acted: the run's actor (for a schedule or webhook, the
-- service actor naming it, with configuredBy) and requestedBy, the user
-- behind it. Notes written before are given their run's actor.
ALTER TABLE notes ADD COLUMN actor jsonb;
ALTER TABLE notes ADD COLUMN requested_by text;
UPDATE notes n SET
    actor = r.actor,
    requested_by = CASE WHEN r.actor ->> 'kind' = 'service' THEN r.actor ->> 'configuredBy' ELSE r.actor ->> 'sub' END
  FROM runs r
 WHERE r.tenant_id = n.tenant_id AND r.run_id = n.run_id;

-- +goose Down
ALTER TABLE notes DROP COLUMN requested_by;
ALTER TABLE notes DROP COLUMN actor;
ALTER TABLE webhooks DROP COLUMN tool_policy_updated_at;
ALTER TABLE webhooks DROP COLUMN tool_policy_updated_by;
ALTER TABLE webhooks DROP COLUMN tool_policy;
ALTER TABLE schedules DROP COLUMN tool_policy_updated_at;
ALTER TABLE schedules DROP COLUMN tool_policy_updated_by;
ALTER TABLE schedules DROP COLUMN tool_policy;
ALTER TABLE runs DROP COLUMN tool_policy;
ALTER TABLE runs DROP COLUMN tool_grants;
