-- +goose Up
-- Limits on running work (issue 19): concurrency and start-rate caps per
-- workflow and per tenant, and cost budgets on agent runs.
--
-- A live run over a cap is persisted as 'throttled' (waiting for a slot)
-- instead of 'queued' (persisted, start pending). A run holds a slot while
-- it is queued or running (live runs only: simulations are exempt), so a
-- slot is released by the very status projection that settles the run,
-- whoever settles it (the interpreter, the reconciler, a cancel).
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('throttled', 'queued', 'running', 'succeeded', 'failed', 'cancelled'));

-- queue_seq orders throttled runs first in, first out: it is drawn under
-- the tenant's admission lock, so it is the order enqueues were accepted.
CREATE SEQUENCE run_queue_seq;
ALTER TABLE runs ADD COLUMN queue_seq bigint;
-- admitted_at: when the run got its slot (every live run; for one never
-- throttled, its enqueue). The start-rate window counts admissions.
ALTER TABLE runs ADD COLUMN admitted_at timestamptz;
-- budget: the enqueue's budget as requested ({maxCostUsd?, maxTokens?}),
-- part of the idempotency binding; NULL when the enqueue gave none.
-- budget_max_*: the effective budget (the request's fields over the
-- workflow's default), what agent calls reserve against.
ALTER TABLE runs ADD COLUMN budget jsonb;
ALTER TABLE runs ADD COLUMN budget_max_tokens bigint CHECK (budget_max_tokens > 0);
ALTER TABLE runs ADD COLUMN budget_max_cost_usd numeric CHECK (budget_max_cost_usd > 0);

-- Existing rows that hold a slot were admitted when they were created.
UPDATE runs SET admitted_at = created_at WHERE status IN ('queued', 'running');

-- The dispatcher's queue (per tenant, FIFO) and a run's position in its
-- workflow's queue.
CREATE INDEX runs_throttled ON runs (tenant_id, queue_seq) WHERE status = 'throttled';
CREATE INDEX runs_throttled_key ON runs (tenant_id, workflow_key, queue_seq) WHERE status = 'throttled';
-- Slots in use (live runs queued or running) and admissions in the rate window.
CREATE INDEX runs_slots ON runs (tenant_id, workflow_key) WHERE status IN ('queued', 'running') AND mode = 'live';
CREATE INDEX runs_admitted ON runs (tenant_id, workflow_key, admitted_at) WHERE mode = 'live' AND admitted_at IS NOT NULL;
-- The sweeper starts runs queued for 30 s since their admission.
DROP INDEX runs_queued;
CREATE INDEX runs_queued ON runs ((COALESCE(admitted_at, created_at))) WHERE status = 'queued';

-- A live run that held a slot (queued or running) and settles frees it: the
-- slot counts are read from statuses, so the release is the status change
-- itself, whatever writes it (the interpreter's terminal append, the
-- reconciler, a cancel). This trigger wakes the dispatchers of the run's
-- tenant (NOTIFY weft_run_slots, delivered at commit) when runs of the
-- tenant wait for a slot. It checks that under the tenant's admission lock
-- taken shared (pg_advisory_xact_lock_shared(2003134068 = "weft",
-- hashtext(tenant)), the lock store.admit holds exclusively): an admission
-- pass that counted this run's slot as taken, and so left a run waiting,
-- has committed before the check, and a pass that starts later waits for
-- this transaction and sees the slot free. No wake-up is lost between them.
-- +goose StatementBegin
CREATE FUNCTION weft_run_slot_freed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(2003134068, hashtext(NEW.tenant_id));
    IF EXISTS (SELECT 1 FROM runs WHERE tenant_id = NEW.tenant_id AND status = 'throttled') THEN
        PERFORM pg_notify('weft_run_slots', NEW.tenant_id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER runs_slot_freed AFTER UPDATE OF status ON runs
    FOR EACH ROW
    WHEN (OLD.status IN ('queued', 'running') AND NEW.status IN ('succeeded', 'failed', 'cancelled') AND NEW.mode = 'live')
    EXECUTE FUNCTION weft_run_slot_freed();

-- Caps and the default budget of one workflow's runs. NULL: no limit.
CREATE TABLE workflow_limits (
    tenant_id             text NOT NULL,
    workflow_key          text NOT NULL,
    max_concurrent_runs   integer CHECK (max_concurrent_runs > 0),
    max_starts_per_minute integer CHECK (max_starts_per_minute > 0),
    budget_max_tokens     bigint CHECK (budget_max_tokens > 0),
    budget_max_cost_usd   numeric CHECK (budget_max_cost_usd > 0),
    updated_by            text NOT NULL,
    updated_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, workflow_key),
    FOREIGN KEY (tenant_id, workflow_key) REFERENCES workflows (tenant_id, key)
);

-- The tenant-wide cap. NULL: no limit.
CREATE TABLE tenant_limits (
    tenant_id           text PRIMARY KEY,
    max_concurrent_runs integer CHECK (max_concurrent_runs > 0),
    updated_by          text NOT NULL,
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- Budget reservations of agent model calls, keyed by the call: (run, node,
-- attempt, turn). A call reserves before it is made (under the run row
-- lock, so parallel nodes of a run never reserve the same remainder) and
-- its reservation is settled with the real usage in the transaction that
-- saves the turn, or released when the call failed. A re-dispatched
-- attempt making the same turn finds its own reservation; reservations an
-- earlier attempt left behind are released when the node reserves again.
CREATE TABLE run_budget_reservations (
    tenant_id     text NOT NULL,
    run_id        text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    node_id       text NOT NULL,
    attempt       integer NOT NULL CHECK (attempt >= 1),
    turn          integer NOT NULL CHECK (turn >= 1),
    state         text NOT NULL CHECK (state IN ('reserved', 'settled', 'released')),
    tokens        bigint NOT NULL CHECK (tokens >= 0),          -- reserved
    cost_usd      numeric NOT NULL CHECK (cost_usd >= 0),       -- reserved
    output_limit  bigint NOT NULL DEFAULT 0,                    -- the call's output-token limit (0: none)
    spent_tokens  bigint,                                       -- settled
    spent_cost_usd numeric,                                     -- settled
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, node_id, attempt, turn)
);
CREATE INDEX run_budget_reserved ON run_budget_reservations (run_id) WHERE state = 'reserved';

-- +goose Down
DROP TRIGGER runs_slot_freed ON runs;
DROP FUNCTION weft_run_slot_freed();
DROP TABLE run_budget_reservations;
DROP TABLE tenant_limits;
DROP TABLE workflow_limits;
DROP INDEX runs_queued;
CREATE INDEX runs_queued ON runs (created_at) WHERE status = 'queued';
DROP INDEX runs_admitted;
DROP INDEX runs_slots;
DROP INDEX runs_throttled_key;
DROP INDEX runs_throttled;
-- Throttled runs never started: they end cancelled, as nothing else could run them.
UPDATE runs SET status = 'cancelled', finished_at = now(),
    error = '{"code": "CANCELLED", "message": "cancelled by a rollback of migration 00014 while throttled"}'::jsonb
    WHERE status = 'throttled';
ALTER TABLE runs DROP COLUMN budget_max_cost_usd;
ALTER TABLE runs DROP COLUMN budget_max_tokens;
ALTER TABLE runs DROP COLUMN budget;
ALTER TABLE runs DROP COLUMN admitted_at;
ALTER TABLE runs DROP COLUMN queue_seq;
DROP SEQUENCE run_queue_seq;
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled'));
