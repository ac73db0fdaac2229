-- +goose Up
-- Workflows, their draft revisions, the content-addressed compiled revisions
-- and the published revisions that point at them. Every row carries its tenant.

CREATE TABLE workflows (
    tenant_id                 text NOT NULL,
    key                       text NOT NULL,
    created_by                text NOT NULL,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    -- Optimistic concurrency: a draft save bumps this only if it still equals
    -- the revision the client edited (UPDATE ... WHERE latest_draft_revision = $expected).
    latest_draft_revision     integer NOT NULL CHECK (latest_draft_revision >= 1),
    -- 0 until the first publication.
    latest_published_revision integer NOT NULL DEFAULT 0 CHECK (latest_published_revision >= 0),
    PRIMARY KEY (tenant_id, key)
);

-- Every saved draft is kept: a save creates the next revision, never overwrites.
CREATE TABLE workflow_drafts (
    tenant_id text NOT NULL,
    key       text NOT NULL,
    revision  integer NOT NULL CHECK (revision >= 1),
    document  jsonb NOT NULL,                       -- the graph as received (well-formed, may hold issues)
    saved_by  text NOT NULL,
    saved_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key, revision),
    FOREIGN KEY (tenant_id, key) REFERENCES workflows (tenant_id, key)
);

-- Compiled revisions are addressed by content: published revisions and
-- simulated drafts with the same checksum share one row.
CREATE TABLE compiled_revisions (
    tenant_id  text NOT NULL,
    checksum   text NOT NULL,
    compiled   jsonb NOT NULL,                      -- graph.Compiled
    plan       jsonb NOT NULL,                      -- graph.Plan
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, checksum)
);

CREATE TABLE workflow_revisions (
    tenant_id      text NOT NULL,
    key            text NOT NULL,
    revision       integer NOT NULL CHECK (revision >= 1),
    checksum       text NOT NULL,
    draft_revision integer NOT NULL,
    published_by   text NOT NULL,
    published_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key, revision),
    FOREIGN KEY (tenant_id, key) REFERENCES workflows (tenant_id, key),
    FOREIGN KEY (tenant_id, key, draft_revision) REFERENCES workflow_drafts (tenant_id, key, revision),
    FOREIGN KEY (tenant_id, checksum) REFERENCES compiled_revisions (tenant_id, checksum)
);
CREATE INDEX workflow_revisions_checksum ON workflow_revisions (tenant_id, checksum);

-- Published history is immutable: runs pin (tenant, checksum) and must find
-- exactly what was published, so the database itself refuses to change it,
-- whatever code path (or operator) tries.
-- +goose StatementBegin
CREATE FUNCTION weft_refuse_mutation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'weft: % on % is not allowed: rows are immutable', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER workflow_revisions_immutable
    BEFORE UPDATE OR DELETE ON workflow_revisions
    FOR EACH ROW EXECUTE FUNCTION weft_refuse_mutation();
CREATE TRIGGER workflow_revisions_no_truncate
    BEFORE TRUNCATE ON workflow_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION weft_refuse_mutation();

CREATE TRIGGER compiled_revisions_immutable
    BEFORE UPDATE OR DELETE ON compiled_revisions
    FOR EACH ROW EXECUTE FUNCTION weft_refuse_mutation();
CREATE TRIGGER compiled_revisions_no_truncate
    BEFORE TRUNCATE ON compiled_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION weft_refuse_mutation();

-- A saved draft is history too (revisions and simulated runs name it).
CREATE TRIGGER workflow_drafts_immutable
    BEFORE UPDATE OR DELETE ON workflow_drafts
    FOR EACH ROW EXECUTE FUNCTION weft_refuse_mutation();

-- +goose Down
DROP TABLE workflow_revisions;
DROP TABLE compiled_revisions;
DROP TABLE workflow_drafts;
DROP TABLE workflows;
DROP FUNCTION weft_refuse_mutation();
