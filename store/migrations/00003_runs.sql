-- +goose Up
-- Runs, their idempotency bindings, the hash-chained event log, notes and the
-- idempotency ledger for business writes. Every row carries its tenant.

CREATE TABLE runs (
    run_id          text PRIMARY KEY,               -- uuid chosen by the starter
    tenant_id       text NOT NULL,
    workflow_key    text NOT NULL,
    revision        integer NOT NULL,               -- 0 for a simulated draft
    draft_revision  integer,                        -- set for simulated drafts
    checksum        text NOT NULL,
    mode            text NOT NULL CHECK (mode IN ('live', 'simulation')),
    status          text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    input           jsonb NOT NULL,
    input_hash      text NOT NULL,
    output          jsonb,
    error           jsonb,
    origin          jsonb NOT NULL,                 -- {kind, id?}
    actor           jsonb NOT NULL,                 -- {kind, sub, configuredBy?, name?, email?}
    permissions     text[] NOT NULL,                -- snapshot at enqueue
    fixtures        jsonb,                          -- simulation fixtures
    workflow_id     text NOT NULL,                  -- weft-<sha256(tenant, key, idempotency key)>
    temporal_run_id text,                           -- first run id; operations use the workflow id
    usage           jsonb NOT NULL DEFAULT '{}'::jsonb,
    last_seq        bigint NOT NULL DEFAULT 0,
    last_hash       text NOT NULL DEFAULT '',
    events_deleted_at timestamptz,                  -- set when retention deleted the run's events
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runs_tenant_created ON runs (tenant_id, created_at DESC, run_id DESC);
CREATE INDEX runs_tenant_key ON runs (tenant_id, workflow_key, created_at DESC);
CREATE INDEX runs_queued ON runs (created_at) WHERE status = 'queued';
CREATE UNIQUE INDEX runs_workflow_id ON runs (workflow_id);
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;

-- (tenant, workflow key, idempotency key) -> what it started.
CREATE TABLE idempotency_bindings (
    tenant_id       text NOT NULL,
    workflow_key    text NOT NULL,
    idempotency_key text NOT NULL,
    -- Deferred: CreateRun claims the binding first (ON CONFLICT DO NOTHING
    -- serialises concurrent enqueues on the key) and inserts the run after.
    run_id          text NOT NULL REFERENCES runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    checksum        text NOT NULL,
    input_hash      text NOT NULL,
    mode            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, workflow_key, idempotency_key)
);

-- The event log: seq and hash assigned by PostgreSQL under the run row lock.
CREATE TABLE run_events (
    run_id         text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    tenant_id      text NOT NULL,
    seq            bigint NOT NULL,
    event_key      text NOT NULL,
    type           text NOT NULL,
    schema_version integer NOT NULL,
    at             timestamptz NOT NULL,
    node_id        text,
    attempt        integer,
    data           jsonb NOT NULL,
    prev_hash      text NOT NULL,
    hash           text NOT NULL,
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, event_key)
);

-- Notes written by workspace.notes.write@1.
CREATE TABLE notes (
    note_id    text PRIMARY KEY,
    tenant_id  text NOT NULL,
    run_id     text NOT NULL,
    node_id    text NOT NULL,
    title      text NOT NULL,
    body       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notes_tenant_created ON notes (tenant_id, created_at DESC, note_id DESC);

-- Idempotency ledger for mutating actions and tool calls: (tenant, tool, key)
-- bound to the canonical input hash and the first result.
CREATE TABLE action_ledger (
    tenant_id  text NOT NULL,
    tool       text NOT NULL,                       -- actionId@version
    key        text NOT NULL,                       -- (run, node[, call ordinal])
    input_hash text NOT NULL,
    result     jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, tool, key)
);

-- Claim-checked values over 32 KiB.
CREATE TABLE run_values (
    tenant_id  text NOT NULL,
    run_id     text NOT NULL,
    node_id    text NOT NULL,
    port       text NOT NULL,
    sha256     text NOT NULL,
    value      jsonb NOT NULL,
    size       integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, run_id, node_id, port, sha256)
);

-- +goose Down
DROP TABLE run_values;
DROP TABLE action_ledger;
DROP TABLE notes;
DROP TABLE run_events;
DROP TABLE idempotency_bindings;
DROP TABLE runs;
