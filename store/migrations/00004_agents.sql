-- +goose Up
-- Agents (SPEC §7): tenant-owned definitions with immutable numbered
-- revisions; the action contracts workers publish; and the per-node agent
-- transcripts a retried attempt resumes from. The idempotency ledger itself
-- is action_ledger (00003), shared by action nodes and agent tool calls.

CREATE TABLE agents (
    tenant_id       text NOT NULL,
    key             text NOT NULL,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    -- Optimistic concurrency for new revisions, like workflows.latest_draft_revision.
    latest_revision integer NOT NULL CHECK (latest_revision >= 1),
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- Archiving hides the agent from new publications only; revisions that
    -- published workflows pin keep running.
    archived_at     timestamptz,
    archived_by     text,
    PRIMARY KEY (tenant_id, key)
);

CREATE TABLE agent_revisions (
    tenant_id  text NOT NULL,
    key        text NOT NULL,
    revision   integer NOT NULL CHECK (revision >= 1),
    content    jsonb NOT NULL,                      -- agents.Definition, normalized
    hash       text NOT NULL,                       -- sha256 of the canonical content
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key, revision),
    FOREIGN KEY (tenant_id, key) REFERENCES agents (tenant_id, key)
);

-- Published revisions pin (key, revision, hash): the row must never change.
CREATE TRIGGER agent_revisions_immutable
    BEFORE UPDATE OR DELETE ON agent_revisions
    FOR EACH ROW EXECUTE FUNCTION weft_refuse_mutation();
CREATE TRIGGER agent_revisions_no_truncate
    BEFORE TRUNCATE ON agent_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION weft_refuse_mutation();

-- Action contracts published by workers at start. Actions are Go code, so
-- the catalog is global (not per tenant). An id@version is published once:
-- a worker registering another contract under it refuses to start.
CREATE TABLE action_contracts (
    action_id    text NOT NULL,
    version      integer NOT NULL CHECK (version >= 1),
    risk         text NOT NULL,
    contract     jsonb NOT NULL,                    -- graph.ActionContract
    hash         text NOT NULL,                     -- catalog.ContractHash
    published_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (action_id, version)
);
CREATE TRIGGER action_contracts_immutable
    BEFORE UPDATE OR DELETE ON action_contracts
    FOR EACH ROW EXECUTE FUNCTION weft_refuse_mutation();

-- One agent node's progress in one run: the transcript (messages, tool calls
-- and their results, usage) and the ledger keys of its mutating tool calls.
-- Saved after every model turn and tool call; a later attempt resumes here.
CREATE TABLE agent_transcripts (
    tenant_id      text NOT NULL,
    run_id         text NOT NULL,
    node_id        text NOT NULL,
    agent_key      text NOT NULL,
    agent_revision integer NOT NULL,
    attempt        integer NOT NULL CHECK (attempt >= 1), -- the attempt that saved last (fencing)
    turn           integer NOT NULL CHECK (turn >= 0),    -- model turns completed
    transcript     jsonb NOT NULL,
    ledger_keys    text[] NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, run_id, node_id)
);

-- +goose Down
DROP TABLE agent_transcripts;
DROP TABLE action_contracts;
DROP TABLE agent_revisions;
DROP TABLE agents;
