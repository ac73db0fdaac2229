-- +goose Up
-- runs.tenant_name feeds context.tenantName of every start of the run, so a
-- run the sweeper (or a cancel of a never-started run) starts renders the
-- same tenant name as the enqueue that created it. Existing rows keep ''
-- (the tenant id then stands in, as before).
ALTER TABLE runs ADD COLUMN tenant_name text NOT NULL DEFAULT '';

-- The reconciler pages through the runs that are not terminal yet, oldest
-- first (store.ActiveRuns: status IN ('queued', 'running'), keyset on
-- (created_at, run_id)); runs_queued covers the sweeper's queued-only scan.
CREATE INDEX runs_active ON runs (created_at, run_id) WHERE status IN ('queued', 'running');

-- +goose Down
DROP INDEX runs_active;
ALTER TABLE runs DROP COLUMN tenant_name;
