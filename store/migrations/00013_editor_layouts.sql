-- +goose Up
-- Where the canvas editor drew a workflow's nodes (issue 16). Positions
-- live beside the drafts, not in the graph document: the document, its
-- strict decoder and its checksum never see them, and moving a node
-- creates no draft revision and no conflict. One row per workflow,
-- replaced whole by each save of the layout.
CREATE TABLE workflow_layouts (
    tenant_id  text NOT NULL,
    key        text NOT NULL,
    positions  jsonb NOT NULL,                      -- {"nodeId": {"x": n, "y": n}}
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key),
    FOREIGN KEY (tenant_id, key) REFERENCES workflows (tenant_id, key)
);

-- +goose Down
DROP TABLE workflow_layouts;
