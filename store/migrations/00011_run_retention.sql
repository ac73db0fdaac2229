-- +goose Up
-- Retention of closed runs (WEFT_RUN_RETENTION_DAYS, issue 20).
--
-- A run closed long enough ago is deleted with its events, transcripts,
-- claim-checked values and ledger entries. Its idempotency binding stays:
-- it records which run the key started and must outlive the run by at
-- least the Temporal namespace's retention, so a reused key is refused
-- (RUN_DELETED) instead of colliding with a workflow id Temporal still
-- holds. The binding therefore no longer references runs; run_finished_at
-- and run_deleted_at say when its run closed and was deleted, and the
-- worker deletes the binding once the namespace's retention has passed too.
ALTER TABLE idempotency_bindings DROP CONSTRAINT IF EXISTS idempotency_bindings_run_id_fkey;
ALTER TABLE idempotency_bindings ADD COLUMN run_finished_at timestamptz;
ALTER TABLE idempotency_bindings ADD COLUMN run_deleted_at timestamptz;
CREATE INDEX idempotency_bindings_run ON idempotency_bindings (run_id);
CREATE INDEX idempotency_bindings_deleted ON idempotency_bindings (run_finished_at) WHERE run_deleted_at IS NOT NULL;

-- Ledger keys start with the run id (agent tool calls: <run>/<node>/<n>) or
-- with the tenant and the run id (action nodes: <tenant>/<run>/<node>), so
-- a run's entries are two key-prefix ranges of its tenant.
CREATE INDEX action_ledger_key_prefix ON action_ledger (tenant_id, key text_pattern_ops);

-- +goose Down
DROP INDEX action_ledger_key_prefix;
DROP INDEX idempotency_bindings_deleted;
DROP INDEX idempotency_bindings_run;
ALTER TABLE idempotency_bindings DROP COLUMN run_deleted_at;
ALTER TABLE idempotency_bindings DROP COLUMN run_finished_at;
DELETE FROM idempotency_bindings b WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = b.run_id);
ALTER TABLE idempotency_bindings ADD CONSTRAINT idempotency_bindings_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES runs (run_id) DEFERRABLE INITIALLY DEFERRED;
