-- +goose Up
-- Bridges (SPEC §8): schedules and webhooks start runs as a service actor
-- that keeps its creator's scope snapshot; revocations withdraw scopes from
-- that snapshot at every recheck; refusals keep the evidence of a firing or
-- delivery that was refused instead of run. Every row carries its tenant.

CREATE TABLE schedules (
    tenant_id            text NOT NULL,
    schedule_id          text NOT NULL,
    workflow_key         text NOT NULL,
    spec                 jsonb NOT NULL,              -- {"cron": "..."} or {"every": "5s"}
    input                jsonb NOT NULL,              -- the run input of every firing
    paused               boolean NOT NULL DEFAULT false, -- as created (Temporal holds the live state)
    created_by           text NOT NULL,               -- sub of the configuring user (configuredBy)
    tenant_name          text NOT NULL DEFAULT '',    -- feeds context.tenantName of the runs
    scopes               text[] NOT NULL,             -- the creator's scope snapshot
    temporal_schedule_id text NOT NULL,               -- weft-sched-<tenant hash>-<schedule id>
    created_at           timestamptz NOT NULL DEFAULT now(),
    deleted_at           timestamptz,                 -- set by DELETE; a firing then does nothing
    PRIMARY KEY (tenant_id, schedule_id),
    FOREIGN KEY (tenant_id, workflow_key) REFERENCES workflows (tenant_id, key)
);
CREATE INDEX schedules_tenant_key ON schedules (tenant_id, workflow_key, created_at, schedule_id)
    WHERE deleted_at IS NULL;

CREATE TABLE webhooks (
    tenant_id         text NOT NULL,
    webhook_id        text NOT NULL,
    workflow_key      text NOT NULL,
    -- AES-256-GCM of the signing secret under the configured webhook key,
    -- with (tenant, webhook id) as additional data: an HMAC needs the secret
    -- itself, so it is encrypted rather than hashed.
    secret_ciphertext bytea NOT NULL,
    secret_nonce      bytea NOT NULL,
    created_by        text NOT NULL,
    tenant_name       text NOT NULL DEFAULT '',
    scopes            text[] NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz,
    PRIMARY KEY (tenant_id, webhook_id),
    FOREIGN KEY (tenant_id, workflow_key) REFERENCES workflows (tenant_id, key)
);
-- POST /hooks/{id} carries no tenant: the id alone finds the webhook.
CREATE UNIQUE INDEX webhooks_id ON webhooks (webhook_id);
CREATE INDEX webhooks_tenant_key ON webhooks (tenant_id, workflow_key, created_at, webhook_id)
    WHERE deleted_at IS NULL;

-- A row withdraws scope from every service actor configured by sub.
CREATE TABLE revocations (
    tenant_id  text NOT NULL,
    sub        text NOT NULL,
    scope      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, sub, scope)
);

-- Evidence of a schedule firing or webhook delivery that was refused (a
-- missing scope, an unpublished workflow, an input the schema refuses)
-- instead of run. firing_key is the idempotency key the run would have had,
-- so a retried firing records its refusal once.
CREATE TABLE bridge_refusals (
    tenant_id   text NOT NULL,
    bridge_kind text NOT NULL CHECK (bridge_kind IN ('schedule', 'webhook')),
    bridge_id   text NOT NULL,
    firing_key  text NOT NULL,
    code        text NOT NULL,
    message     text NOT NULL,
    missing     text[] NOT NULL DEFAULT '{}',
    details     jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, bridge_kind, bridge_id, firing_key)
);
CREATE INDEX bridge_refusals_latest ON bridge_refusals (tenant_id, bridge_kind, bridge_id, created_at DESC);

-- +goose Down
DROP TABLE bridge_refusals;
DROP TABLE revocations;
DROP TABLE webhooks;
DROP TABLE schedules;
