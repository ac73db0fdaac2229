-- +goose Up
-- Tenant skills (issue 20): guidance texts with immutable numbered
-- revisions, like agents (00004). An agent revision lists skills
-- {key, revision}; publication pins each one's content hash, and the
-- harness appends their texts to the agent's instructions.
CREATE TABLE skills (
    tenant_id       text NOT NULL,
    key             text NOT NULL,
    name            text NOT NULL,                  -- the latest revision's name
    latest_revision integer NOT NULL CHECK (latest_revision >= 1),
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- Archiving hides the skill from new publications only; revisions that
    -- published workflows pin keep being appended.
    archived_at     timestamptz,
    archived_by     text,
    PRIMARY KEY (tenant_id, key)
);

CREATE TABLE skill_revisions (
    tenant_id  text NOT NULL,
    key        text NOT NULL,
    revision   integer NOT NULL CHECK (revision >= 1),
    name       text NOT NULL,
    text       text NOT NULL,
    hash       text NOT NULL,                       -- sha256 of canonical {name, text}
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key, revision),
    FOREIGN KEY (tenant_id, key) REFERENCES skills (tenant_id, key)
);

-- Published revisions pin (key, revision, hash): the row must never change.
CREATE TRIGGER skill_revisions_immutable
    BEFORE UPDATE OR DELETE ON skill_revisions
    FOR EACH ROW EXECUTE FUNCTION weft_refuse_mutation();
CREATE TRIGGER skill_revisions_no_truncate
    BEFORE TRUNCATE ON skill_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION weft_refuse_mutation();

-- Templated schedule input (issue 20): string values of a schedule's input
-- may hold {{ }} templates, resolved at every firing with the schedule's
-- explicit bindings (e.g. {"agentId": "triage"}). The row keeps the raw
-- template; input_templated is set when the schedule was created with a
-- template (schedules created before stay literal, as they were).
ALTER TABLE schedules ADD COLUMN input_bindings jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE schedules ADD COLUMN input_templated boolean NOT NULL DEFAULT false;

-- The input one firing of a templated schedule resolved to, stored before
-- its enqueue: a retried enqueue of the same firing reuses it, so a value
-- that changed in between never turns the retry into an
-- IDEMPOTENCY_CONFLICT. Pruned by the worker after a week (a firing is
-- retried for 15 minutes at most).
CREATE TABLE schedule_firings (
    tenant_id   text NOT NULL,
    schedule_id text NOT NULL,
    firing_key  text NOT NULL,                      -- <schedule id>@<scheduled time>
    input       jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, schedule_id, firing_key)
);
CREATE INDEX schedule_firings_created ON schedule_firings (created_at);

-- +goose Down
DROP TABLE schedule_firings;
ALTER TABLE schedules DROP COLUMN input_templated;
ALTER TABLE schedules DROP COLUMN input_bindings;
DROP TABLE skill_revisions;
DROP TABLE skills;
